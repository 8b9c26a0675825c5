# Sourced by the bench scripts from the checkout's root: builds the release binary and measures a copy of
# it, in the state an installed binary is in after a reboot. Sets $release (the build directory) and
# $stockade.
#
# On this VM how a 15 MB binary's pages sit in the page cache changes its start by more than a
# millisecond (stockade's own processes fault its text in, each of them): a freshly written copy started
# fastest (`explain` 3.6 ms), the linker's output 0.5 ms slower, and a file read back from disk after its
# cache was dropped slowest (4.9 ms; BENCHMARKS.md). The peers measured beside it are installed files read
# from disk, so the copy's cache is dropped here and it is read from disk the same way.
cargo build --release --quiet
# .cargo/config.toml builds for the host tuple explicitly, so the artifacts are under target/<host>/.
release=$PWD/target/$(rustc -vV | sed -n 's/^host: //p')/release
mkdir -p target/bench-bin
cp "$release/stockade" target/bench-bin/stockade.new
mv target/bench-bin/stockade.new target/bench-bin/stockade
stockade=$PWD/target/bench-bin/stockade
python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fdatasync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$stockade"
