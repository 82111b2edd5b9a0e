"""The results store, near the ground: the results root's folders (ResultsRoot), the run folder's files
(RunFolder) and the store of finished records and training claims (Store). Nothing here knows tables or configs."""

from semcl.store.results import Store, non_finite
from semcl.store.root import ResultsRoot
from semcl.store.run_folder import STORE_FORMAT, RunFolder

__all__ = ["STORE_FORMAT", "ResultsRoot", "RunFolder", "Store", "non_finite"]
