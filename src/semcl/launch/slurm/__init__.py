"""launch/slurm"""
