"""Export a local Hugging Face transformers model for training with Cleave.

    .venv-hf/bin/python models/export_hf.py MODEL_DIR -o model.onnx
        [--seq T] [--batch B] [--static-batch] [--opset 14|17] [--seed S]
        [--task causal-lm|masked-lm]
    .venv-hf/bin/python models/export_hf.py --from-config FAMILY --save-model DIR
        [--layers N] [--hidden D] [--heads H] [--kv-heads K]
        [--intermediate F] [--vocab V] [--positions P] [--seed S] [-o model.onnx ...]
    .venv-hf/bin/python models/export_hf.py MODEL_DIR --import-params trained.safetensors
        --save-model OUT_DIR

MODEL_DIR is a folder as save_pretrained writes it: a config.json and,
optionally, the weights as safetensors (or pytorch_model.bin); without
weights the model is initialized from the config with --seed. Nothing is
fetched from the hub (HF_HUB_OFFLINE=1, local_files_only).
`scripts/install-deps.sh` creates .venv-hf/ (transformers 4.49 over Debian's
torch 1.13).

The export is the training export of README.md, so nobody has to know its
footguns: torch.onnx.export with training=TrainingMode.TRAINING and
do_constant_folding=False (one initializer per parameter, named as in the
model's state_dict, a tied head kept tied), the model's own loss as the one
output (`model(input_ids=..., labels=...).loss`), inputs `input_ids` and
`labels` (int64 [batch, seq], the batch axis symbolic unless
--static-batch), and every initializer that is no parameter (a buffer the
export kept, e.g. rotary tables or masks) listed in the `cleave.buffers`
metadata, which the importer turns into constants. An embedding's
padding_idx (BERT's, OPT's and Gemma's pad token) has no ONNX form: the
export writes it to the `cleave.padding_idx` metadata ({initializer:
row}), and Cleave, as PyTorch, gives that row no gradient from the lookup,
so the pad token may be an input. What
the export changes in the model, it prints: dropout probabilities are set
to 0 (Cleave trains without dropout), the attention is the eager one, the
KV cache is off.

Labels follow Cleave's batches (DESIGN.md): `labels` holds the token that
follows each position of `input_ids`. A causal LM's loss shifts its labels
by one itself, so the export shifts them back by one just before that loss
(position 0 gets the ignored label -100): the loss is then transformers'
own, that of `model(input_ids=ids, labels=ids)`, which predicts the T-1
positions that have their next token inside the window. A masked LM's labels are used as
they are.

--from-config builds a model of one FAMILY (gpt2, llama, mistral, qwen2,
gpt-neox, opt, phi, gemma, bert) at the given sizes, dropout off, and writes
it to --save-model DIR (config.json and model.safetensors), for tests;
with -o it is also exported.

--import-params loads what `cleave-run --save-params` wrote (keyed by ONNX
initializer name, i.e. state_dict names) back into the model of MODEL_DIR
with load_state_dict, every tied name of a parameter set from its one
initializer, and writes the model with save_pretrained to --save-model.
"""
import argparse
import glob
import json
import os
import re
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")   # torch.onnx.export's tracer warnings

import torch                                        # noqa: E402

try:
    import transformers                             # noqa: E402
    from transformers.models.auto import modeling_auto  # noqa: E402
except ImportError as e:
    sys.exit("export_hf.py: cannot import transformers (%s): run "
             "scripts/install-deps.sh, which creates .venv-hf/, and run this "
             "script with .venv-hf/bin/python" % e)

import export                                       # noqa: E402
import safetensors_io                               # noqa: E402

transformers.logging.set_verbosity_error()

# --from-config families: the model_type of transformers' AutoConfig, the
# task, and the config's name for the MLP width.
FAMILIES = {
    "gpt2": ("gpt2", "causal-lm", "n_inner"),
    "llama": ("llama", "causal-lm", "intermediate_size"),
    "mistral": ("mistral", "causal-lm", "intermediate_size"),
    "qwen2": ("qwen2", "causal-lm", "intermediate_size"),
    "gpt-neox": ("gpt_neox", "causal-lm", "intermediate_size"),
    "opt": ("opt", "causal-lm", "ffn_dim"),
    "phi": ("phi", "causal-lm", "intermediate_size"),
    "gemma": ("gemma", "causal-lm", "intermediate_size"),
    "bert": ("bert", "masked-lm", "intermediate_size"),
}

TASKS = {
    "causal-lm": modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    "masked-lm": modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
}

# A config key holding a dropout probability: resid_pdrop, attention_dropout,
# hidden_dropout_prob, OPT's layerdrop...
DROPOUT_KEY = re.compile(r"(dropout|pdrop|drop_prob|layerdrop)")


def _bitwise_or(g, a, b):
    """aten::bitwise_or of two bool tensors is ONNX Or. torch 1.13 exports
    no bitwise_or at all, and transformers 4.49's Mistral and Qwen2 combine
    their causal and sliding-window masks with it."""
    kinds = (a.type().scalarType(), b.type().scalarType())
    if kinds != ("Bool", "Bool"):
        raise RuntimeError("export_hf.py: bitwise_or of %s and %s: only bool "
                           "masks are exported (as Or)" % kinds)
    return g.op("Or", a, b)


for _opset in range(9, 18):
    torch.onnx.register_custom_op_symbolic("aten::bitwise_or", _bitwise_or, _opset)


def prepare_config(config):
    """The changes a training export needs, made on `config`; returns one
    line per change, for the user to read."""
    notes = []
    for key, value in sorted(config.to_dict().items()):
        if DROPOUT_KEY.search(key) and isinstance(value, float) and value != 0:
            setattr(config, key, 0.0)
            notes.append("%s %g -> 0 (Cleave trains without dropout)" % (key, value))
    if getattr(config, "use_cache", False):
        config.use_cache = False
        notes.append("use_cache -> False (no KV cache when training)")
    # torch 1.13 has no scaled_dot_product_attention; say so rather than
    # let transformers pick.
    config._attn_implementation = "eager"
    return notes


def task_of(config, task=None):
    """The model class to build and its task: --task, else the config's
    `architectures` when it is a language-model head, else the causal-LM
    class of its model_type, else the masked-LM one."""
    mt = config.model_type
    if task:
        if mt not in TASKS[task]:
            sys.exit("export_hf.py: transformers %s has no %s model for model_type "
                     "'%s'" % (transformers.__version__, task, mt))
        return getattr(transformers, TASKS[task][mt]), task
    for arch in getattr(config, "architectures", None) or []:
        for t, names in TASKS.items():
            if arch in names.values() and hasattr(transformers, arch):
                return getattr(transformers, arch), t
    for t, names in TASKS.items():
        if mt in names:
            return getattr(transformers, names[mt]), t
    sys.exit("export_hf.py: model_type '%s' (architectures %s) has no causal-LM "
             "or masked-LM head in transformers %s; Cleave trains a model that "
             "returns its loss" % (mt, getattr(config, "architectures", None),
                                   transformers.__version__))


def has_weights(model_dir):
    return bool(glob.glob(os.path.join(model_dir, "*.safetensors"))
                or glob.glob(os.path.join(model_dir, "pytorch_model*.bin")))


def load_model(model_dir, task=None, seed=0, prepare=True):
    """The model of a local folder, prepared for a training export (with
    prepare=False as the folder says, to save it again unchanged).
    Returns (model, task, notes)."""
    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        sys.exit("export_hf.py: %s has no config.json; give a folder as "
                 "save_pretrained writes it" % model_dir)
    config = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
    notes = prepare_config(config) if prepare else []
    cls, task = task_of(config, task)
    if has_weights(model_dir):
        model = cls.from_pretrained(model_dir, config=config, local_files_only=True,
                                    attn_implementation="eager")
    else:
        notes.append("no weights in %s: initialized from config.json with seed %d"
                     % (model_dir, seed))
        torch.manual_seed(seed)
        model = cls(config)
    model.train()
    return model, task, notes


def build_from_config(family, layers=2, hidden=64, heads=4, kv_heads=None,
                      intermediate=None, vocab=256, positions=64, seed=0):
    """A model of `family` at the given sizes, dropout off, initialized with
    `seed` as transformers initializes it. Returns (model, task)."""
    model_type, task, ffn_key = FAMILIES[family]
    if hidden % heads:
        sys.exit("export_hf.py: --hidden %d is not a multiple of --heads %d" % (hidden, heads))
    kwargs = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                  num_attention_heads=heads, max_position_embeddings=positions)
    kwargs[ffn_key] = intermediate or 4 * hidden
    defaults = transformers.AutoConfig.for_model(model_type).to_dict()
    if "num_key_value_heads" in defaults:
        kwargs["num_key_value_heads"] = kv_heads or heads
    elif kv_heads:
        sys.exit("export_hf.py: %s has no --kv-heads (num_key_value_heads)" % family)
    if "head_dim" in defaults:
        kwargs["head_dim"] = hidden // heads
    if family == "opt":
        kwargs["word_embed_proj_dim"] = hidden
    config = transformers.AutoConfig.for_model(model_type, **kwargs)
    prepare_config(config)
    cls, task = task_of(config, task)
    torch.manual_seed(seed)
    model = cls(config)
    model.train()
    return model, task


def _next_tokens_to_hf_labels(labels):
    """transformers' causal loss compares position t with labels[t + 1];
    ours are already the next tokens: shift them back by one (position 0
    gets the ignored label -100)."""
    return torch.cat([torch.full_like(labels[:, :1], -100), labels[:, :-1]], 1)


def with_loss_forward(model, task):
    """Makes `model` a module whose forward(input_ids, labels) returns its
    own loss, by giving it a subclass of its class (same name, so
    transformers picks the same loss) that overrides forward. Unlike a
    wrapping module this keeps every parameter's name as it is in the
    model's state_dict, which the export's initializers then carry.

    A causal LM's labels are shifted back by one (_next_tokens_to_hf_labels)
    where its loss is computed, in the subclass's loss_function, after the
    body: shifted at the start, the labels would be a value live across the
    whole graph, which every pipeline cut must carry (and which made
    cleave-compile's partition put a stage of two slices first). A model
    that computes its loss without loss_function (older transformers, e.g.
    4.48's GPT-NeoX) has them shifted at the start instead, found on its
    first forward."""
    base = type(model)
    if getattr(base, "cleave_loss_forward", False):
        return model
    causal = task == "causal-lm"
    attrs = {"__module__": base.__module__, "cleave_loss_forward": True,
             "cleave_align_early": False}

    def forward(self, input_ids, labels):
        early = causal and type(self).cleave_align_early
        self.cleave_labels_aligned = False
        loss = base.forward(self, input_ids=input_ids,
                            labels=_next_tokens_to_hf_labels(labels) if early else labels).loss
        if causal and not early and not self.cleave_labels_aligned:
            type(self).cleave_align_early = True
            return forward(self, input_ids, labels)
        return loss
    attrs["forward"] = forward

    if causal:
        def loss_function(self):
            hf_loss = base.loss_function.fget(self)
            if type(self).cleave_align_early:
                return hf_loss

            def aligned(logits, labels=None, *args, **kwargs):
                if labels is None:
                    labels = kwargs.pop("labels")
                self.cleave_labels_aligned = True
                return hf_loss(logits, _next_tokens_to_hf_labels(labels), *args, **kwargs)
            return aligned
        attrs["loss_function"] = property(loss_function)

    model.__class__ = type(base.__name__, (base,), attrs)
    return model


def check_no_dropout(model, input_ids, labels):
    """The train-mode loss must not depend on the random state: a dropout
    that prepare_config did not find would make the export differ from
    what Cleave trains."""
    with torch.no_grad():
        torch.manual_seed(1)
        a = model(input_ids, labels)
        torch.manual_seed(2)
        b = model(input_ids, labels)
    if not torch.equal(a, b):
        sys.exit("export_hf.py: the train-mode loss changes with the random seed "
                 "(%.7f, %.7f): %s still has an active dropout; set its "
                 "probability to 0 in config.json" % (float(a), float(b), type(model).__name__))


def export_hf(model, task, out_path, seq, batch=1, dynamic_batch=True, opset=17):
    """Exports `model` (from load_model or build_from_config, which this
    makes return its loss) for training to `out_path`; returns the
    ModelProto, the names of the initializers listed as buffers and
    {initializer: padding row} of the embeddings with a padding_idx (the
    `cleave.padding_idx` metadata export.export_for_training writes)."""
    vocab = model.config.vocab_size
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit and seq > limit:
        sys.exit("export_hf.py: --seq %d exceeds the model's max_position_embeddings "
                 "%d" % (seq, limit))
    with_loss_forward(model, task)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    labels = torch.randint(0, vocab, (batch, seq), generator=g)
    check_no_dropout(model, ids, labels)
    params = {n for n, _ in model.named_parameters()}

    def metadata(proto):
        inits = [t.name for t in proto.graph.initializer]
        lost = params - set(inits)
        if lost:
            sys.exit("export_hf.py: the export has no initializer for the "
                     "parameters %s" % sorted(lost)[:10])
        return {"cleave.buffers": ",".join(n for n in inits if n not in params),
                "cleave.hf_model": json.dumps({
                    "class": type(model).__name__, "model_type": model.config.model_type,
                    "task": task, "transformers": transformers.__version__},
                    sort_keys=True, separators=(",", ":"))}

    proto = export.export_for_training(model, (ids, labels), out_path,
                                       ["input_ids", "labels"], opset=opset,
                                       dynamic_batch=dynamic_batch, metadata=metadata)
    buffers = [t.name for t in proto.graph.initializer if t.name not in params]
    padding = {}
    for p in proto.metadata_props:
        if p.key == "cleave.padding_idx":
            padding = json.loads(p.value)
    return proto, buffers, padding


def load_cleave_params(model, path):
    """Loads a `cleave-run --save-params` file into `model` with
    load_state_dict (strict): each state_dict entry takes the tensor saved
    under its name or under another name of the same tied tensor (GPT-2's
    lm_head.weight is transformer.wte.weight); buffers the file lacks (the
    export's constants) keep their values. Every saved tensor must be used."""
    saved, _ = safetensors_io.load(path, torch_tensors=True)
    state = model.state_dict(keep_vars=True)
    names_of = {}
    for name, t in state.items():
        names_of.setdefault(id(t), []).append(name)
    params = {id(p) for p in model.parameters()}
    new, used = {}, set()
    for name, t in state.items():
        src = next((n for n in names_of[id(t)] if n in saved), None)
        if src is None:
            if id(t) in params:
                sys.exit("export_hf.py: %s has no parameter %s (nor its tied names %s)"
                         % (path, name, names_of[id(t)]))
            new[name] = t.detach()
            continue
        if tuple(saved[src].shape) != tuple(t.shape):
            sys.exit("export_hf.py: %s: %s has shape %s, the model's %s is %s"
                     % (path, src, list(saved[src].shape), name, list(t.shape)))
        new[name] = saved[src].to(t.dtype)
        used.add(src)
    unused = sorted(set(saved) - used)
    if unused:
        sys.exit("export_hf.py: %s holds tensors the model does not have: %s"
                 % (path, unused[:10]))
    model.load_state_dict(new, strict=True)
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir", nargs="?", help="a local Hugging Face model folder")
    ap.add_argument("-o", "--output", help="the ONNX file to write")
    ap.add_argument("--seq", type=int, help="sequence length (default: "
                    "max_position_embeddings, at most 1024)")
    ap.add_argument("--batch", type=int, default=1, help="example batch (default 1; "
                    "the batch of a --static-batch export)")
    ap.add_argument("--static-batch", action="store_true",
                    help="fix the batch axis to --batch instead of a symbol")
    ap.add_argument("--opset", type=int, default=17, choices=range(14, 18))
    ap.add_argument("--seed", type=int, default=0,
                    help="initialization seed of a model without weights")
    ap.add_argument("--task", choices=sorted(TASKS),
                    help="the head to train (default: from config.json)")
    ap.add_argument("--from-config", choices=sorted(FAMILIES),
                    help="build a model of this family instead of reading MODEL_DIR")
    for flag, default, what in (("layers", 2, "blocks"), ("hidden", 64, "width"),
                                ("heads", 4, "attention heads"),
                                ("kv-heads", None, "key/value heads (default: --heads)"),
                                ("intermediate", None, "MLP width (default 4 x hidden)"),
                                ("vocab", 256, "vocabulary"),
                                ("positions", 64, "max_position_embeddings")):
        ap.add_argument("--" + flag, type=int, default=default,
                        help="--from-config: %s%s" % (what, "" if default is None
                                                      else " (default %d)" % default))
    ap.add_argument("--save-model", metavar="DIR",
                    help="write the model (save_pretrained) to DIR")
    ap.add_argument("--import-params", metavar="FILE",
                    help="load cleave-run --save-params FILE into MODEL_DIR's model "
                         "and write it to --save-model")
    a = ap.parse_args(argv)
    if bool(a.model_dir) == bool(a.from_config):
        ap.error("give either MODEL_DIR or --from-config FAMILY")
    if not (a.output or a.save_model):
        ap.error("nothing to write: give -o and/or --save-model")
    if a.import_params:
        if not (a.model_dir and a.save_model) or a.output:
            ap.error("--import-params needs MODEL_DIR and --save-model (and no -o)")
        # Its config as it was (dropout, cache): only the weights change.
        model, _, _ = load_model(a.model_dir, a.task, a.seed, prepare=False)
        load_cleave_params(model, a.import_params)
        model.save_pretrained(a.save_model, safe_serialization=True)
        print("loaded %s into %s, wrote %s" % (a.import_params, type(model).__name__,
                                              a.save_model))
        return
    if a.from_config:
        model, task = build_from_config(a.from_config, a.layers, a.hidden, a.heads,
                                        a.kv_heads, a.intermediate, a.vocab,
                                        a.positions, a.seed)
        notes = []
    else:
        model, task, notes = load_model(a.model_dir, a.task, a.seed)
    if a.save_model:
        model.save_pretrained(a.save_model, safe_serialization=True)
    for note in notes:
        print("export_hf.py: " + note)
    if not a.output:
        return
    seq = a.seq or min(getattr(model.config, "max_position_embeddings", 1024) or 1024, 1024)
    proto, buffers, padding = export_hf(model, task, a.output, seq, a.batch,
                                        not a.static_batch, a.opset)
    for name, row in sorted(padding.items()):
        print("export_hf.py: note: %s has padding_idx %d, which ONNX cannot say: "
              "written to the cleave.padding_idx metadata, so Cleave gives row %d "
              "no gradient from the lookup, as PyTorch does" % (name, row, row))
    n = sum(p.numel() for p in model.parameters())
    print("exported %s (%s, %s parameters) to %s: opset %d, inputs input_ids and "
          "labels [%s, %d], output loss; buffers made constants: %s"
          % (type(model).__name__, task, "{:,}".format(n), a.output, a.opset,
             a.batch if a.static_batch else "batch", seq, ", ".join(buffers) or "none"))


if __name__ == "__main__":
    main()
