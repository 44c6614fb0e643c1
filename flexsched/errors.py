"""Errors raised for bad user input; each message is one line naming what is at fault."""


class FlexschedError(Exception):
    """Base class of every error flexsched raises on purpose."""


class DefinitionError(FlexschedError, ValueError):
    """A compute definition is malformed (wrong indices, bad shape, misused axis, ...)."""


class RegistryError(FlexschedError, LookupError):
    """An unknown task name, or arguments that do not fit a registered task."""


class EvaluationError(FlexschedError, ValueError):
    """Input arrays that do not fit the computation being evaluated."""
