"""The scalar types a computation may use, and how they combine."""

from .errors import DefinitionError

FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64")
TENSOR_DTYPES = FLOAT_DTYPES + INT_DTYPES
BOOL = "bool"

# Rank for promotion: the wider of two operands wins, any float beats any int.
_RANK = {"bool": 0, "int32": 1, "int64": 2, "float32": 3, "float64": 4}


def check_tensor_dtype(dtype, tensor_name):
    """Return dtype if a tensor may hold it, else raise naming the tensor."""
    if dtype not in TENSOR_DTYPES:
        raise DefinitionError(
            f"tensor '{tensor_name}': unsupported dtype {dtype!r}; choose one of {', '.join(TENSOR_DTYPES)}")
    return dtype


def is_float(dtype):
    return dtype in FLOAT_DTYPES


def is_int(dtype):
    return dtype in INT_DTYPES


def promote(a, b):
    """The dtype of a binary arithmetic result."""
    return a if _RANK[a] >= _RANK[b] else b
