"""The papers' class semantics: superclass hierarchies and rank matrices (hierarchy), class-name similarities
(name_similarity, word_vectors), nearest neighbours and their sharded search (neighbours, knn_shards) and the
negatives drawn by similarity (negatives). Import the module you need; this package re-exports nothing."""
