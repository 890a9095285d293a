// The train layer: `gpemu train` fed by a real (or modelled) data pipeline,
// data-stall accounting on the emulated timeline, several GPUs per node with
// DDP gradient all-reduce. Overview: docs/train.md.
//
//   train/trainer.h       the driver (Trainer, TrainOptions, TrainResult)
//   train/batch_source.h  batches: the real loader, in-memory batches
//   train/loader_model.h  the modelled loader (exact stalls under the virtual clock)
//   train/ddp.h           backward split and the DDP reducer
//   train/host_sync.h     host threads waiting for each other on either clock
//   train/outputs.h       JSON summary, run report, stall spans
//   train/datasets.h      cache folder and the default synthetic dataset
#pragma once

#include "gpemu/train/batch_source.h"
#include "gpemu/train/datasets.h"
#include "gpemu/train/ddp.h"
#include "gpemu/train/host_sync.h"
#include "gpemu/train/loader_model.h"
#include "gpemu/train/outputs.h"
#include "gpemu/train/trainer.h"
