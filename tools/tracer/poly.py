"""Exact polynomial fitting of traced quantities in batch size B and sequence
length S.

A quantity q (FLOPs, bytes, a tensor's size) is stored as coefficients c_i of
monomials B^a_i * S^b_i (the model's basis). Coefficients are solved exactly
(rational arithmetic) from as many traces as there are monomials, then checked
against a further trace at a shape not used for the fit.
"""
from fractions import Fraction

BASIS_B = ((0, 0), (1, 0))                                       # c0 + c1*B
BASIS_BS = ((0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2))      # + S, S^2, B*S, B*S^2


def monomials(basis, B, S):
    S = S or 0
    return [Fraction(B) ** a * Fraction(S) ** b for a, b in basis]


def invert(mat):
    """Inverse of a square matrix of Fractions (Gauss-Jordan)."""
    n = len(mat)
    a = [list(row) + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(mat)]
    for col in range(n):
        piv = next((r for r in range(col, n) if a[r][col] != 0), None)
        if piv is None:
            raise ValueError("fit points do not determine the polynomial (singular design)")
        a[col], a[piv] = a[piv], a[col]
        pv = a[col][col]
        a[col] = [x / pv for x in a[col]]
        for r in range(n):
            if r != col and a[r][col] != 0:
                f = a[r][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
    return [row[n:] for row in a]


class Fitter:
    def __init__(self, basis, points):
        """points: list of (B, S) used for the fit, len(points) == len(basis)."""
        if len(points) != len(basis):
            raise ValueError("need exactly one fit point per basis monomial")
        self.basis = tuple(basis)
        self.points = list(points)
        self.inv = invert([monomials(basis, B, S) for B, S in points])

    def fit(self, values):
        """values: the quantity at each fit point -> tuple of coefficients
        (ints when integral, else floats)."""
        out = []
        for row in self.inv:
            c = sum((r * v for r, v in zip(row, values)), Fraction(0))
            out.append(int(c) if c.denominator == 1 else float(c))
        return tuple(out)

    def evaluate(self, coeffs, B, S):
        return evaluate(self.basis, coeffs, B, S)


def evaluate(basis, coeffs, B, S):
    tot = Fraction(0)
    for (a, b), c in zip(basis, coeffs):
        if c:
            tot += Fraction(c) * Fraction(B) ** a * Fraction(S or 0) ** b
    return tot
