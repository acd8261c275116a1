"""Training: the shared loop, optimisers, checkpoints, distributed set-up."""
