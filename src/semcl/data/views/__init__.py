"""How a view is made: the batched image recipes (augment), the per-image torchvision and timm ones (tvaugment),
which a recipe name builds (build), the recipes' table (recipes), the colour view drawn on the host and finished
on the device (colour_draw, colour_finish, colour_view), crops and multi-crop, CutMix between neighbours, the
views of file-backed sets (file_views) and their handout to the device (handout), and the clip views of video
runs (clip_augment, clip_loader). Import the module you need; this package re-exports nothing."""
