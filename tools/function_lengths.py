"""The longest functions of a source folder, in lines (issue 29's target: every function in src/cli
under 80). A function is a definition opening at namespace scope (column 0) whose braces are counted
to their close, string and character literals and // comments left out.

usage (from the repository root):
    /usr/bin/python3 tools/function_lengths.py src/cli [N]
    /usr/bin/python3 tools/function_lengths.py src/cli --max 79   (exit 1 naming any longer function;
                                                                  ctest sources.cli_function_lengths)
"""
import glob
import re
import sys

LITERALS = re.compile(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'')


def functions(path):
    lines = open(path).read().split('\n')
    i = 0
    while i < len(lines):
        line = lines[i]
        head = line.split('(')[0]
        if (line and not line[0].isspace() and line.rstrip().endswith('{') and '(' in line and '=' not in head
                and not line.startswith(('namespace', 'struct', 'class', 'enum', '//', '#', 'extern'))):
            depth, j = 0, i
            while j < len(lines):
                code = LITERALS.sub('', lines[j].split('//')[0])
                depth += code.count('{') - code.count('}')
                if depth == 0 and j > i:
                    break
                j += 1
            yield j - i + 1, head.split()[-1]
            i = j
        i += 1


def main():
    folder = sys.argv[1]
    found = [(length, f.split('/')[-1], name) for f in glob.glob(folder + '/*.cpp') for length, name in functions(f)]
    if not found:
        sys.exit(f"function_lengths: no function found in {folder}/*.cpp; give a source folder")
    if len(sys.argv) > 3 and sys.argv[2] == '--max':
        limit = int(sys.argv[3])
        longer = [x for x in found if x[0] > limit]
        for length, f, name in sorted(longer, reverse=True):
            print(f"{length:5d}  {f}  {name}: over {limit} lines")
        print(f"{len(found)} functions in {folder}, the longest {max(found)[0]} lines")
        sys.exit(1 if longer else 0)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    for length, f, name in sorted(found, reverse=True)[:n]:
        print(f"{length:5d}  {f}  {name}")


if __name__ == '__main__':
    main()
