"""Thin tasks: ids in, call a service, nothing else."""
