"""The project's exception roots. Adapters translate foreign exceptions into these with `raise ... from`."""


class FoxhuntError(Exception):
    """Root of the errors foxhunt reports to a user (exit code 2 unless said otherwise)."""


class ConfigError(FoxhuntError):
    """A configuration file, override or command-line value is wrong; the message names where."""


class InputError(FoxhuntError):
    """Input data (a feed file, a spec) is malformed; the message names the file and line."""


class JournalError(FoxhuntError):
    """Root of journal failures."""


class JournalUnavailable(JournalError):
    """The database cannot be reached or stopped answering; retryable."""


class JournalLocked(JournalError):
    """Another writer holds the journal; a second writer must not start."""


class JournalNotFound(JournalError):
    """No journal has that name."""


class JournalArchived(JournalError):
    """The events asked for were archived out of the database (`foxhunt journal restore` brings them back)."""


class JournalMismatch(JournalError):
    """The journal exists but what was asked of it contradicts what it holds (config digest, ...)."""


class EmbeddedDatabaseError(FoxhuntError):
    """The private PostgreSQL cluster could not be set up, started or stopped."""


class VerificationFailed(FoxhuntError):
    """Replay derived something other than what the journal recorded (exit code 1)."""


class DataError(FoxhuntError):
    """A training set cannot be built as asked (no market data, a range too short to split); the message
    says which journals and ranges it looked at."""


class ModelError(FoxhuntError):
    """A model cannot be stored, found or used: missing, corrupted (its parameters do not hash to its
    manifest's), trained on another feature set than the one configured, or a store that failed. `what`
    says which kind of failure a scoring one was (messages/scores.py, ModelFailed): load, error,
    out_of_memory."""

    def __init__(self, message: str, what: str = "error") -> None:
        super().__init__(message)
        self.what = what
