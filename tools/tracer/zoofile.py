"""Build a zoo file (plain JSON, see docs/model-zoo.md) from traces at several
shapes: check that every trace has the same structure, fit each quantity
exactly as a polynomial in B (and S), verify the fit on one more trace, and
encode everything as compact column arrays."""
import json
import sys
import time

import torch

from . import TRACER_VERSION
from .poly import BASIS_B, BASIS_BS, Fitter, evaluate
from .trace import trace_once, PRECISIONS, OPTIMIZERS, END

FORMAT = "gpemu-zoo/1"
ROLES = ("param", "buffer", "input", "state", "grad", "act", "external")
SETUP = {
    "iteration": "steady state: zero_grad(set_to_none=True); forward + loss; backward; "
                 "optimizer.step(); optimizer state already exists",
    "sgd": {"lr": 0.1, "momentum": 0.9, "weight_decay": 0, "foreach": False},
    "adam": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0,
             "amsgrad": False, "foreach": False},
    "fp32": {"compute": "float32"},
    "amp": {"compute": "float16 autocast (CUDA autocast op lists of torch 1.13)",
            "master_weights": "float32", "loss_scaling": "dynamic (GradScaler)",
            "bf16": "same tensors and ops; drop the loss-scale mul and the _amp_* ops"},
}


def fit_plan(spec):
    """(basis, fit points, check point) for a model."""
    if spec.seq is None:
        return BASIS_B, [(2, None), (3, None)], (5, None)
    s = spec.fit_seqs or (16, 32, 48, 80)
    pts = [(b, x) for b in (2, 3) for x in s[:3]]
    return BASIS_BS, pts, (4, s[3])


# --- flattening a raw trace into structure + numbers -------------------------
def _parts(raw):
    yield "main", raw["main"]
    for k in sorted(raw["sections"]):
        yield k, raw["sections"][k]


def structure(raw):
    out = []
    for name, part in _parts(raw):
        out.append((name, tuple((o[0], o[1], o[2], o[7], o[8]) for o in part["ops"]),
                    tuple(t[1:] for t in part["tensors"])))
    out.append(tuple(sorted((k, tuple(v)) for k, v in raw["main"]["phases"].items())))
    out.append(tuple(map(tuple, raw["main"]["param_grad"])))
    return tuple(out)


def numbers(raw):
    vals = []
    for _, part in _parts(raw):
        for o in part["ops"]:
            vals.extend(o[3:7])
        for t in part["tensors"]:
            vals.append(t[0])
    return vals


def _first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            if isinstance(x, tuple) and isinstance(y, tuple):
                return f"[{i}]" + _first_difference(x, y)
            return f"[{i}]: {str(x)[:200]} != {str(y)[:200]}"
    return f"lengths {len(a)} != {len(b)}"


class PolyTable:
    def __init__(self, nbasis):
        self.rows = [tuple([0] * nbasis)]
        self.index = {self.rows[0]: 0}

    def add(self, coeffs):
        i = self.index.get(coeffs)
        if i is None:
            i = len(self.rows)
            self.rows.append(coeffs)
            self.index[coeffs] = i
        return i


class Table:
    def __init__(self, items=()):
        self.rows = list(items)
        self.index = {r: i for i, r in enumerate(self.rows)}

    def add(self, item):
        i = self.index.get(item)
        if i is None:
            i = len(self.rows)
            self.rows.append(item)
            self.index[item] = i
        return i


def fit_variant(traces, check, fitter, polys, kinds, dtypes, roles):
    st = structure(traces[0])
    for t in traces[1:] + [check]:
        s2 = structure(t)
        if s2 != st:
            raise RuntimeError(
                f"trace structure differs between shapes (B={traces[0]['B']},S={traces[0]['S']})"
                f" and (B={t['B']},S={t['S']}): {_first_difference(st, s2)}")
    cols = list(zip(*[numbers(t) for t in traces]))
    coeffs = [fitter.fit(c) for c in cols]
    # exactness check at a shape not used for the fit
    chk = numbers(check)
    B, S = check["B"], check["S"]
    for i, (c, v) in enumerate(zip(coeffs, chk)):
        if evaluate(fitter.basis, c, B, S) != v:
            raise RuntimeError(f"polynomial fit is not exact at B={B} S={S} "
                               f"(quantity #{i}: fit {float(evaluate(fitter.basis, c, B, S))}, "
                               f"traced {v})")
    pidx = iter([polys.add(c) for c in coeffs])
    raw = traces[0]

    def enc_part(part):
        ops = {"kind": [], "dtype": [], "flops": [], "rd": [], "wr": [], "par": [],
               "in": [], "out": []}
        for o in part["ops"]:
            ops["kind"].append(kinds.add((o[0], o[1])))
            ops["dtype"].append(dtypes.add(o[2]))
            for key in ("flops", "rd", "wr", "par"):
                ops[key].append(next(pidx))
            ops["in"].append(list(o[7]))
            ops["out"].append(list(o[8]))
        tens = {"size": [], "alloc": [], "free": [], "role": [], "dtype": []}
        for t in part["tensors"]:
            tens["size"].append(next(pidx))
            tens["alloc"].append(t[1])
            tens["free"].append(t[2])
            tens["role"].append(roles.index(t[3]))
            tens["dtype"].append(dtypes.add(t[4]))
        return ops, tens

    ops, tens = enc_part(raw["main"])
    var = {"phases": raw["main"]["phases"], "param_grad": raw["main"]["param_grad"],
           "tensors": tens, "ops": ops, "optimizers": {}}
    for k in sorted(raw["sections"]):
        o, t = enc_part(raw["sections"][k])
        var["optimizers"][k] = {"tensors": t, "ops": o}
    assert next(pidx, None) is None
    return var


# --- evaluation helpers (also used by the tests and the report) ---------------
def eval_poly(doc, idx, B, S=None):
    v = evaluate([tuple(b) for b in doc["basis"]], doc["poly"][idx], B, S)
    return int(v) if v.denominator == 1 else float(v)


def phase_flops(doc, variant, B, S=None):
    var = doc["variants"][variant]
    out = {}
    fl = var["ops"]["flops"]
    for ph, (a, b) in var["phases"].items():
        out[ph] = sum(eval_poly(doc, fl[i], B, S) for i in range(a, b))
    for k, sec in var["optimizers"].items():
        out["optimizer:" + k] = sum(eval_poly(doc, i, B, S) for i in sec["ops"]["flops"])
    return out


def live_peak(doc, variant, optimizer, B, S=None):
    """Peak of the sum of live tensor bytes (no allocator rounding or caching),
    in bytes: a sanity number; the C++ allocator emulation gives the real one."""
    var = doc["variants"][variant]
    parts = [var["tensors"], var["optimizers"][optimizer]["tensors"]]
    n_ops = len(var["ops"]["kind"]) + len(var["optimizers"][optimizer]["ops"]["kind"])
    delta = [0] * (n_ops + 1)
    base = 0
    for tens in parts:
        for s, a, f in zip(tens["size"], tens["alloc"], tens["free"]):
            nb = eval_poly(doc, s, B, S)
            if a < 0:
                base += nb
            else:
                delta[a] += nb
            if f >= 0:
                delta[f + 1] -= nb
    peak = cur = base
    for i in range(n_ops):
        cur += delta[i]
        peak = max(peak, cur)
    return peak


# --- top level -----------------------------------------------------------------
def build_doc(spec, precisions=PRECISIONS, optimizers=OPTIMIZERS, log=None):
    log = log or (lambda *a: None)
    basis, points, check_pt = fit_plan(spec)
    fitter = Fitter(basis, points)
    polys = PolyTable(len(basis))
    kinds, dtypes = Table(), Table()
    variants = {}
    params = None
    for prec in precisions:
        t0 = time.time()
        traces = [trace_once(spec, B, S, prec, optimizers) for B, S in points]
        check = trace_once(spec, check_pt[0], check_pt[1], prec, optimizers)
        params = traces[0]["params"]
        variants[prec] = fit_variant(traces, check, fitter, polys, kinds, dtypes, ROLES)
        log(f"  {spec.name} {prec}: {len(traces) + 1} traces, "
            f"{len(traces[0]['main']['ops'])} ops fwd+bwd, {time.time() - t0:.1f}s")
        del traces, check
    spec.release()
    vars_ = ["B"] if spec.seq is None else ["B", "S"]
    doc = {
        "format": FORMAT,
        "model": {
            "name": spec.name, "family": spec.family, "input": spec.input_desc,
            "params": params,
            "default_batch": spec.default_batch,
            "ref": {"B": spec.default_batch, **({"S": spec.seq} if spec.seq else {})},
            "fwd_flops_per_sample": None,
            "notes": spec.notes, "config": spec.config,
        },
        "tracer": {"version": TRACER_VERSION, "torch": torch.__version__,
                   "torchvision": _tv_version(), "python": sys.version.split()[0]},
        "setup": SETUP,
        "vars": vars_,
        "basis": [list(b) for b in basis],
        "fit": {"points": [[b] if s is None else [b, s] for b, s in points],
                "check": [check_pt[0]] if check_pt[1] is None else list(check_pt)},
        "roles": list(ROLES),
        "dtypes": dtypes.rows,
        "kinds": [list(k) for k in kinds.rows],
        "poly": [list(p) for p in polys.rows],
        "variants": variants,
    }
    B, S = spec.default_batch, spec.seq
    ref_var = "fp32" if "fp32" in variants else precisions[0]
    fwd = phase_flops(doc, ref_var, B, S)["forward"]
    doc["model"]["fwd_flops_per_sample"] = fwd / B if fwd % B else fwd // B
    return doc


def _tv_version():
    try:
        import torchvision
        return torchvision.__version__
    except Exception:  # pragma: no cover
        return None


def dumps(doc):
    """JSON text: the header readable, the big column arrays one per line."""
    def enc(v, depth):
        if isinstance(v, dict) and depth < 4:
            pad = "\n" + " " * (depth + 1)
            items = [json.dumps(k) + ":" + enc(x, depth + 1) for k, x in v.items()]
            return "{" + pad + ("," + pad).join(items) + "\n" + " " * depth + "}"
        return json.dumps(v, separators=(",", ":"))
    return enc(doc, 0) + "\n"


def validate(doc):
    """Consistency checks of a zoo document; returns a list of problems (empty
    when fine): intervals are well formed, every tensor an op reads or writes
    is alive at that op, and every allocation is an output of its op."""
    problems = []
    for vname, var in doc["variants"].items():
        main_ops, main_t = var["ops"], var["tensors"]
        n_main, t_main = len(main_ops["kind"]), len(main_t["size"])
        parts = [("main", main_ops, main_t, 0, 0)]
        parts += [(k, s["ops"], s["tensors"], n_main, t_main)
                  for k, s in var["optimizers"].items()]
        for pname, ops, tens, op0, t0 in parts:
            alloc = main_t["alloc"] + (tens["alloc"] if t0 else [])
            free = main_t["free"] + (tens["free"] if t0 else [])
            n_ops = len(ops["kind"])
            where = f"{vname}/{pname}"
            for j, (a, f) in enumerate(zip(tens["alloc"], tens["free"])):
                if a != -1 and not op0 <= a < op0 + n_ops:
                    problems.append(f"{where}: tensor {t0 + j} allocated at {a}")
                if f != -1 and not (max(a, op0) <= f < op0 + n_ops):
                    problems.append(f"{where}: tensor {t0 + j} freed at {f} (alloc {a})")
                if a >= 0 and (t0 + j) not in ops["out"][a - op0]:
                    problems.append(f"{where}: tensor {t0 + j} is not an output of op {a}")
            for k in range(n_ops):
                gk = op0 + k
                for tid in ops["in"][k] + ops["out"][k]:
                    if tid >= len(alloc):
                        problems.append(f"{where}: op {gk} uses unknown tensor {tid}")
                        continue
                    a, f = alloc[tid], free[tid]
                    # a section may only touch main tensors that live to the end
                    dead = f != -1 and (f < gk or (op0 and tid < t0))
                    if a > gk or dead:
                        problems.append(f"{where}: op {gk} uses tensor {tid} outside [{a},{f}]")
    return problems
