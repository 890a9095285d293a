#!/usr/bin/env python3
"""Reference for gpemu's loader benchmark: torchvision ImageFolder + torch DataLoader.

Runs the same transforms as gpemu's loader (RandomResizedCrop + RandomHorizontalFlip +
ToTensor + Normalize with ImageNet statistics) with the given worker count and batch
size, and prints one JSON line: images, seconds, images_per_s (or "error" when torch
or torchvision cannot be imported, exit status 2).
"""
import argparse
import json
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--root", required=True, help="ImageFolder root")
    p.add_argument("--images", type=int, default=0, help="use the first N images (0: all)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--prefetch-factor", type=int, default=2)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    try:
        import torch
        from torch.utils.data import DataLoader, Subset
        from torchvision import datasets, transforms
    except Exception as e:  # torch missing or broken: say so, do not crash the benchmark
        print(json.dumps({"error": f"torch/torchvision unavailable: {e}"}))
        return 2

    torch.manual_seed(args.seed)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(args.size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    dataset = datasets.ImageFolder(args.root, transform=transform)
    if 0 < args.images < len(dataset):
        dataset = Subset(dataset, range(args.images))
    kwargs = dict(batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                  drop_last=False, pin_memory=False)
    if args.workers > 0:
        kwargs["prefetch_factor"] = args.prefetch_factor
    loader = DataLoader(dataset, **kwargs)

    images = 0
    seconds = 0.0
    epochs = []
    for _ in range(args.epochs):
        count = 0
        start = time.perf_counter()
        for x, _y in loader:
            count += int(x.shape[0])
        elapsed = time.perf_counter() - start
        epochs.append(elapsed)
        images += count
        seconds += elapsed
    print(json.dumps({
        "images": images,
        "seconds": seconds,
        "images_per_s": images / seconds if seconds > 0 else None,
        "epoch_seconds": epochs,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
