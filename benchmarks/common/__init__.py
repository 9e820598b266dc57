"""What the benchmarks and studies share: provenance (commits, program fingerprints, host records, documentation
blocks, result files) and the minimal PureJaxRL-style PPO loop the speed benchmarks measure against."""
