# Sourced by the bench scripts from the checkout's root: builds the release binary and measures a copy of
# it, as `cargo install` would put one in place. Sets $release (the build directory) and $stockade.
#
# A binary straight from the linker starts more slowly than a copy of it: its page cache was filled in the
# linker's small writes, and every process start faults its pages in smaller pieces (here `stockade run --
# /bin/true` took 11.6 ms from target/ and 10.5 ms from a copy, paired; BENCHMARKS.md). The peers measured
# beside it are installed files too.
cargo build --release --quiet
# .cargo/config.toml builds for the host tuple explicitly, so the artifacts are under target/<host>/.
release=$PWD/target/$(rustc -vV | sed -n 's/^host: //p')/release
mkdir -p target/bench-bin
cp "$release/stockade" target/bench-bin/stockade.new
mv target/bench-bin/stockade.new target/bench-bin/stockade
stockade=$PWD/target/bench-bin/stockade
