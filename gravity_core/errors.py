"""GRAVITY's error tree, split by whose fault an error is.

::

    GravityError                      root: nothing else escapes the library
    ├── ConfigurationError            the caller: bad argument, missing optional dependency
    │   └── MissingDependencyError    an extra is not installed (message names the pip command)
    ├── InputDataError                the caller's data: a conversation file or record is malformed
    ├── UnexpectedModelOutput         the model: output that stays invalid after the bounded re-ask
    ├── ProviderError                 the model's provider or its set-up: rate limit, timeout,
    │                                 connection, rejected key, unknown model, a model's own exception
    └── AnchorStoreError              the KB on disk: missing, corrupt or of another schema version
        └── StorageAccessError        the machine: the OS refused to read or write the folder (permissions,
                                      disk full, a file or folder where the other should be, a name too long)
"""

from __future__ import annotations

__all__ = [
    "AnchorStoreError",
    "ConfigurationError",
    "GravityError",
    "InputDataError",
    "MissingDependencyError",
    "ProviderError",
    "StorageAccessError",
    "UnexpectedModelOutput",
]


class GravityError(Exception):
    """Root of every error GRAVITY raises."""


class ConfigurationError(GravityError, ValueError):
    """A usage mistake by the application developer: a bad argument or setting."""


class MissingDependencyError(ConfigurationError, ImportError):
    """An optional dependency is not installed; the message names the extra to install.

    ``pip install 'gravity-memory[EXTRA]'`` works where GRAVITY is installed (from its clone or a
    wheel): pip keeps the installed GRAVITY and adds the extra's packages. The package is not on
    PyPI, so a fresh environment installs it from the clone: ``pip install -e '.[EXTRA]'``.
    """

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the '{package}' package: pip install 'gravity-memory[{extra}]' "
            f"(adds the '{extra}' extra to the installed GRAVITY; in its clone: pip install -e '.[{extra}]')"
        )


class InputDataError(GravityError, ValueError):
    """A conversation file or record does not have the expected shape.

    The message names the file, the record and the field, and what was expected.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        record: str | None = None,
        field: str | None = None,
    ) -> None:
        self.path = path
        self.record = record
        self.field = field
        where = ", ".join(
            part
            for part in (
                f"file {path}" if path else "",
                f"record {record}" if record else "",
                f"field '{field}'" if field else "",
            )
            if part
        )
        super().__init__(f"{where}: {message}" if where else message)


class UnexpectedModelOutput(GravityError):
    """The model's answer stayed invalid after the bounded re-ask.

    A model adapter may raise it for one answer it could not read (a structured-output answer
    that is not JSON or was cut off at the length limit, with ``n_attempts=1``):
    :func:`~gravity_core.llm.json_call.call_json` then treats it as an unusable answer and re-asks.

    Attributes:
        reason: what was wrong with the answer, without the attempt count.
        last_completion: the raw text of the last answer, kept for the build log.
        n_attempts: how many times the model was asked.
    """

    def __init__(self, message: str, *, last_completion: str, n_attempts: int) -> None:
        self.reason = message
        self.last_completion = last_completion
        self.n_attempts = n_attempts
        super().__init__(f"{message} (after {n_attempts} attempt(s))")


class ProviderError(GravityError):
    """The model or embedding provider failed, or its set-up did.

    Rate limit, timeout, connection, HTTP error, but also a rejected API key, an unknown model name
    or any other exception a model raised: the message names the model and what to check.

    Attributes:
        provider: the model (or provider) the error is about, e.g. ``openai:gpt-4o-mini``.
        status_code: the HTTP status, when there was one.
        retryable: whether sending the request again may help; ``None`` leaves it to the status
            code (and, without one, counts as transient: adapters raise this error without a
            status for rate limits, timeouts and connection failures).
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        retryable: bool | None = None,
    ) -> None:
        self.provider = provider
        self.status_code = status_code
        self.retryable = retryable
        super().__init__(f"{provider}: {message}")


class AnchorStoreError(GravityError):
    """A KB on disk is missing, corrupt, or written by an incompatible schema version."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class StorageAccessError(AnchorStoreError):
    """The OS refused to read or write a KB or SGMem folder; the KB itself is not at fault.

    The message names the folder (and the file, when it is not the folder), the OS's reason and
    what to do, e.g. ``cannot write KB folder /x/kb: Permission denied (make it writable or choose
    another folder)``. What was on disk before is intact.

    Attributes:
        path: the file or folder the OS refused.
        folder: the KB or SGMem folder.
        errno: the OS error number (``None`` when the OS gave none, e.g. numpy's short write).
    """

    def __init__(self, message: str, *, path: str, folder: str, errno: int | None = None) -> None:
        self.path = path
        self.folder = folder
        self.errno = errno
        GravityError.__init__(self, message)
