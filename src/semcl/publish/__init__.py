"""Bundles of finished runs for others to check: `semcl publish` (bundle) and `semcl publish --verify` (verify).

One module per job: weights (safetensors + timm's config.json), model_index (the Papers-with-Code model-index),
schema (its checks), card (README.md), environment (environment.json), bundle (the whole, written then verified
then put in place), verify (a bundle's checks). Above report/ (it renders the tables) and engine/ (it reads
checkpoints as `semcl export` does)."""
