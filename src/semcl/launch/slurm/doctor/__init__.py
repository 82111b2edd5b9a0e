"""`semcl doctor --cluster <profile>`: one acceptance job on the cluster before the paper runs.

The job (`job.DoctorJob`) has the profile's shape (2 nodes, up to 2 GPUs each; on a CPU-only profile 2 CPU
tasks per node over gloo) and each of its ranks writes what it measured to `rank<R>.json` in the doctor
folder: rendezvous and device (`probes`), CPUs and loader workers (`probes`), all-reduce bandwidth
(`probes`), 20 DDP steps of a few registry rows through the engine's training loop (`steps`), a requeue
signal mid-run and an exact resume (`resume`), an error on rank 1 told apart from a peer's death
(`rank_fault`), and the results folder's free space and write speed (`probes`). `submit` sends the job and
waits; `page` judges the rank files and writes one page of Markdown and JSON.
"""
