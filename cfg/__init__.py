"""ptxkit.cfg: control-flow graphs, dataflow, and the generic/async proxy-fence pass."""
