"""The private data of a run, as the engine reads it: one batch of rows at a time.

A run touches the data only through :meth:`_Data.gather`: the rows of one Poisson
subsample, converted to float32 and prepared by the model (the regression models
append the intercept column). Large data are never copied: a float32 or float64
NumPy array (a ``numpy.memmap`` too) or a tensor is read where it lies, a SciPy
sparse matrix through its CSR arrays, and each step gathers, converts and prepares
only its own rows -- O(kappa N) time and memory per step, no allocation of size N.
Small data sets (a prepared float32 copy of at most ``_PREPARE_ONCE_BYTES``) are
prepared once up front, which saves a pass over every batch; the batches are the same,
bit for bit, either way (tested).
"""

import warnings

import numpy as np
import torch

__all__ = []

#: Largest prepared float32 copy of the data made up front (bytes); above it every
#: batch is gathered from the caller's arrays and prepared on its own.
_PREPARE_ONCE_BYTES = 1 << 25
#: Rows per chunk when a pass over all the data is needed (row norms, full preparation).
_CHUNK_ROWS = 1 << 14
#: Precision of the data and the per-example gradients (phi and the sums are float64).
_REAL = torch.float32


def _appends_ones(model):
    """Whether ``model.prepare_data(X, y)`` only appends a column of ones to ``X``.

    True for skdpvi's regression models with an intercept (and subclasses that keep
    their ``prepare_data``): the engine then gathers their large batches straight
    into a buffer whose last column holds the ones, instead of gathering the rows and
    copying them next to a new column of ones.
    """
    from ..models import LinearRegressionModel, LogisticRegressionModel

    for cls in (LinearRegressionModel, LogisticRegressionModel):
        if isinstance(model, cls) and type(model).prepare_data is cls.prepare_data:
            return bool(model.fit_intercept)
    return False


def _is_sparse(a):
    return hasattr(a, "tocsr") and hasattr(a, "nnz")


def _as_tensor(a, device):
    """A tensor view of ``a`` where possible (no copy of float32/float64 arrays)."""
    if isinstance(a, torch.Tensor):
        return a.to(device)
    a = np.asarray(a)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    if any(stride < 0 for stride in a.strides):  # a reversed view (X[::-1]): torch
        a = np.ascontiguousarray(a)               # has no negative strides
    with warnings.catch_warnings():
        # read-only arrays (memory maps opened with mode="r"): the engine never writes
        warnings.filterwarnings("ignore", message=".*not writ", category=UserWarning)
        return torch.as_tensor(a, device=device)


class _CSRRows:
    """Dense float32 rows gathered from a CSR matrix: O(nnz of the rows) per gather."""

    def __init__(self, matrix, device):
        matrix = matrix.tocsr()
        if not matrix.has_canonical_format:  # duplicates would be summed by densifying
            matrix = matrix.copy()
            matrix.sum_duplicates()
        self.shape = matrix.shape
        self.indptr = torch.as_tensor(matrix.indptr.astype(np.int64), device=device)
        self.indices = torch.as_tensor(matrix.indices.astype(np.int64), device=device)
        data = matrix.data
        if data.dtype not in (np.float32, np.float64):
            data = data.astype(np.float64)
        self.data = torch.as_tensor(data, device=device)

    def gather(self, index, out=None):
        """Rows ``index`` as a dense float32 (B, p) tensor (written into ``out`` if given)."""
        starts = self.indptr.index_select(0, index)
        lengths = self.indptr.index_select(0, index + 1) - starts
        rows = torch.repeat_interleave(torch.arange(len(index), device=index.device), lengths)
        first = torch.cumsum(lengths, 0) - lengths  # where each row's entries start
        pos = (torch.arange(len(rows), device=index.device)
               + torch.repeat_interleave(starts - first, lengths))
        if out is None:
            out = torch.zeros((len(index), self.shape[1]), dtype=_REAL, device=index.device)
        else:
            out.zero_()
        out[rows, self.indices.index_select(0, pos)] = self.data.index_select(0, pos).to(_REAL)
        return out


class _Data:
    """The per-example arrays of one run and the batches gathered from them.

    Parameters
    ----------
    model : skdpvi.models.Model
    data : tuple of array-like
        Per-example arrays (first axis N); the first may be a SciPy sparse matrix.
    device : torch.device
    prepare : bool, optional
        Prepare all the data once (a float32 copy); default: only when that copy
        is at most ``_PREPARE_ONCE_BYTES``. Never for sparse data.
    """

    def __init__(self, model, data, device, prepare=None):
        self.model = model
        self.device = device
        self.sources = tuple(_CSRRows(a, device) if _is_sparse(a) else _as_tensor(a, device)
                             for a in data)
        self.n_examples = int(self.sources[0].shape[0])
        if any(int(s.shape[0]) != self.n_examples for s in self.sources):
            raise ValueError("All data arrays must have the same number of rows; got "
                             f"{[int(s.shape[0]) for s in self.sources]}.")
        sparse = any(isinstance(s, _CSRRows) for s in self.sources)
        if prepare is None:
            prepare = not sparse and self.small()
        self.columns = self.prepared(0, self.n_examples) if prepare else None
        # large batches of the regression models: gathered into a buffer with the ones
        self.ones = not prepare and len(self.sources) == 2 and _appends_ones(model)
        self.buffer = None

    def small(self):
        """Whether a prepared float32 copy of the data (an intercept column counted)
        takes at most ``_PREPARE_ONCE_BYTES``."""
        width = sum(int(np.prod(s.shape[1:])) + 1 for s in self.sources)
        return 4 * self.n_examples * width <= _PREPARE_ONCE_BYTES

    def _rows(self, index):
        """The batch rows of every source, as float32, not yet prepared."""
        return tuple(s.gather(index) if isinstance(s, _CSRRows)
                     else s.index_select(0, index).to(_REAL) for s in self.sources)

    def prepared(self, start, stop):
        """Rows start..stop-1 of the prepared data (a float32 copy)."""
        index = torch.arange(start, stop, device=self.device)
        if not any(isinstance(s, _CSRRows) for s in self.sources):
            return self.model.prepare_data(*(s[start:stop].to(_REAL) for s in self.sources))
        return self.model.prepare_data(*self._rows(index))

    def gather(self, index):
        """The prepared batch rows ``index`` (int32 or int64, sorted) of every array.

        For data not prepared up front, the first array of the regression models is
        returned as a view of a buffer that the next gather overwrites.
        """
        if self.columns is not None:
            return tuple(a.index_select(0, index) for a in self.columns)
        if self.ones:
            return self._gather_with_ones(index)
        return self.model.prepare_data(*self._rows(index))

    def _gather_with_ones(self, index):
        """``model.prepare_data`` of the rows, for a model that appends a column of ones."""
        X, y = self.sources
        n_rows, width = len(index), int(X.shape[1])
        if self.buffer is None or self.buffer.shape[0] < n_rows:
            self.buffer = torch.ones((max(n_rows, 1), width + 1), dtype=_REAL,
                                     device=self.device)
        rows = self.buffer[:n_rows, :width]
        if isinstance(X, _CSRRows):
            X.gather(index, out=rows)
        elif X.dtype == _REAL:
            torch.index_select(X, 0, index, out=rows)
        else:
            rows.copy_(X.index_select(0, index))
        return self.buffer[:n_rows], y.index_select(0, index).to(_REAL)

    def row_sq_norms(self, weights):
        """``|weights * x_i|^2`` of every prepared row of the first array, as float32.

        Summed in float64, chunk by chunk (no temporary of size N x p); the same
        numbers whether the data were prepared up front or not.
        """
        out = torch.empty(self.n_examples, dtype=_REAL, device=self.device)
        for start in range(0, self.n_examples, _CHUNK_ROWS):
            stop = min(start + _CHUNK_ROWS, self.n_examples)
            rows = (self.columns[0][start:stop] if self.columns is not None
                    else self.prepared(start, stop)[0])
            out[start:stop] = ((rows.double() * weights) ** 2).sum(-1).to(_REAL)
        return out
