"""ptxkit.generators: layouts and PTX generators for register-level reductions."""
