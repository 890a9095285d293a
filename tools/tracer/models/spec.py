"""What the tracer needs to know about a model."""


class ModelSpec:
    """name: zoo name. family: cnn | transformer | recommender | unet.
    build(): a fresh nn.Module whose parameters and buffers are meta tensors.
    inputs(B, S): (tuple of model args, loss target), meta tensors.
    loss(output, target): scalar loss.
    seq: default sequence length for sequence models (None: no S variable).
    input_desc: human-readable per-sample input. default_batch: batch size used
    for the header's reference shape. cache: build once and reuse the module.
    precisions: the traced variants; pure half ("half", apex O2-like) is traced
    for transformers, the models benchmarks train that way. optimizers: the
    traced optimizer sections; sgd_momentum: SGD's momentum (0: no buffers).
    """

    def __init__(self, name, family, build, inputs, loss, input_desc, default_batch,
                 seq=None, notes="", config=None, cache=True, fit_seqs=None, precisions=None):
        self.name = name
        self.family = family
        self._build = build
        self.inputs = inputs
        self.loss = loss
        self.input_desc = input_desc
        self.default_batch = default_batch
        self.seq = seq
        self.notes = notes
        self.config = config or {}
        self.cache = cache
        self.fit_seqs = fit_seqs
        self._model = None
        self.optimizers = ("sgd", "adam")
        self.sgd_momentum = 0.9
        self.precisions = tuple(precisions) if precisions else (
            ("fp32", "amp", "half") if family == "transformer" else ("fp32", "amp"))

    def build(self):
        if not self.cache:
            return self._build()
        if self._model is None:
            self._model = self._build()
        m = self._model
        for p in m.parameters():
            p.grad = None
        return m

    def release(self):
        self._model = None
