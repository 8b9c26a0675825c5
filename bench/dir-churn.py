# Creations that each open their directory anew (BENCHMARKS.md, issue #15): 5,000 files made in `out/`
# through a directory descriptor opened and closed for each, so the descriptor's number is the same every
# time while its open file is not. Measures what the mediator's memory of directory descriptors costs a
# program it cannot help.
#   python3 bench/dir-churn.py     (in a directory that has `out/`)
import os
for i in range(5000):
    fd = os.open('out', os.O_RDONLY | os.O_DIRECTORY)
    os.close(os.open(f'f{i}', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    os.close(fd)
