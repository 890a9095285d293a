"""Source files longer than a limit, in lines (issue 29: a file that grows past a few hundred lines
usually holds two concepts; docs/architecture.md's layer map says which file holds which). Files
known to be longer are listed, each with the reason it is still one file, in tools/long_files.txt
("path  reason", one a line, # comments); a listed file that is no longer over the limit is named
so that its line can go.

usage (from the repository root):
    /usr/bin/python3 tools/file_lengths.py src include [N]     (the N longest files)
    /usr/bin/python3 tools/file_lengths.py src include --max 600 --allow tools/long_files.txt
        (exit 1 naming every file over 600 lines that the list does not give a reason for;
         ctest sources.file_lengths)
"""
import os
import sys

SOURCES = ('.cpp', '.h', '.hpp')


def lengths(folders):
    for folder in folders:
        if not os.path.isdir(folder):
            sys.exit(f"file_lengths: {folder} is not a folder; give source folders such as src include")
        for root, _, files in os.walk(folder):
            for name in files:
                if name.endswith(SOURCES):
                    path = os.path.join(root, name)
                    with open(path, encoding='utf-8', errors='replace') as f:
                        yield sum(1 for _ in f), path


def allowed(path):
    out = {}
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            parts = line.split(None, 1)
            if len(parts) < 2:
                sys.exit(f"file_lengths: {path}:{number}: '{line}' gives no reason; expected 'path  reason'")
            out[parts[0]] = parts[1]
    return out


def main():
    args = sys.argv[1:]
    limit, allow = None, {}
    if '--max' in args:
        i = args.index('--max')
        if i + 1 >= len(args) or not args[i + 1].isdigit():
            sys.exit("file_lengths: --max takes a whole number of lines, e.g. --max 600")
        limit = int(args[i + 1])
        del args[i:i + 2]
    if '--allow' in args:
        i = args.index('--allow')
        if i + 1 >= len(args):
            sys.exit("file_lengths: --allow takes a file of 'path  reason' lines, e.g. tools/long_files.txt")
        allow = allowed(args[i + 1])
        del args[i:i + 2]
    n = 10
    if args and args[-1].isdigit():
        n = int(args.pop())
    found = sorted(lengths(args or ['src', 'include']), reverse=True)
    if not found:
        sys.exit(f"file_lengths: no source file in {' '.join(args)}")
    if limit is None:
        for length, path in found[:n]:
            print(f"{length:6d}  {path}")
        return
    over = [(length, path) for length, path in found if length > limit]
    unexplained = [(length, path) for length, path in over if path not in allow]
    for length, path in unexplained:
        print(f"{length:6d}  {path}: over {limit} lines; split it by concept, or give the reason it is one "
              f"concept in the --allow list")
    for path in sorted(set(allow) - {p for _, p in over}):
        print(f"note: {path} is listed as long but is not over {limit} lines now; its line can go")
    print(f"{len(found)} files, {len(over)} over {limit} lines, {len(unexplained)} of them without a reason")
    sys.exit(1 if unexplained else 0)


if __name__ == '__main__':
    main()
