"""User-facing errors: one line that names the file and the key, then a non-zero exit."""


class SemclError(Exception):
    """An error caused by the user's input (config, registry, data root, results store).

    The CLI prints ``str(err)`` on one line and exits with status 2; nothing is written.
    """


class ConfigError(SemclError):
    """A registry entry or run config breaks the schema."""


class DataError(SemclError):
    """A data root or dataset file is missing or malformed."""


class ResultsError(SemclError):
    """A results-store file (metrics.json, manifest) is unreadable."""
