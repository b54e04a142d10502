//===- Spec.cpp - the parallelism spec of cleave-compile ------------------===//
//
// Every key of DESIGN.md's table and every key SMP v1 and v2 document
// (/work/shared/SMP-KEYS.md, docs/spec-keys.md) is known here, in one of three
// classes: implemented (read into Spec); accepted only at its documented
// default until its feature lands; or meaningless to an ahead-of-time
// compiler, accepted with a note that plan.json carries. Unknown keys, wrong
// types, values out of bounds, non-finite numbers, products that overflow and
// impossible combinations are errors that name the key as the user wrote it
// (an alias such as `partitions` included) and say what to change.
//
//===----------------------------------------------------------------------===//

#include "frontend/Spec.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace llvm;
using cleave::Spec;

/// Returns the error of one read, if any, from the enclosing function.
#define CLEAVE_SPEC_READ(call)                                                 \
  do {                                                                         \
    if (Error e = (call))                                                      \
      return std::move(e);                                                     \
  } while (0)

namespace {

Error fail(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

/// Reads one object's keys, each at most once, and reports the first error.
/// A nested object's keys are named with their path ("optimizer.lr").
class Reader {
public:
  Reader(const json::Object &object, StringRef source, StringRef prefix = "")
      : object(object), source(source), prefix(prefix) {}

  /// The key as the user wrote it: an alias (`partitions`), a key read from
  /// the `mpi` block (`mpi.processes_per_host`), or `key` itself.
  std::string name(StringRef key) const {
    auto it = writtenAs.find(key);
    return prefix.str() + (it == writtenAs.end() ? key.str() : it->second);
  }
  StringMap<std::string> writtenAs;

  Error error(StringRef key, const Twine &message) {
    return fail(source + ": spec key '" + name(key) + "': " + message);
  }

  template <typename T> Error get(StringRef key, T &out);

  /// A key whose feature is not implemented yet: only `defaultValue`.
  template <typename T>
  Error notYet(StringRef key, const T &defaultValue, StringRef issue) {
    T value = defaultValue;
    if (Error e = get(key, value))
      return e;
    if (value != defaultValue)
      return error(key, formatv("is not implemented yet ({0}); remove it "
                                "or give its default, {1}",
                                issue, json::Value(defaultValue)));
    return Error::success();
  }

  Error unknownKeys(const StringSet<> &known) {
    for (const auto &entry : object) {
      StringRef key = entry.first;
      if (known.contains(key))
        continue;
      std::string closest;
      unsigned best = 3;
      for (const auto &k : known) {
        unsigned d = key.edit_distance(k.getKey(), true, best);
        if (d < best) {
          best = d;
          closest = k.getKey().str();
        }
      }
      return fail(source + ": unknown spec key '" + prefix + key + "'" +
                  (closest.empty()
                       ? std::string("; see docs/spec-keys.md")
                       : "; did you mean '" + prefix.str() + closest + "'?"));
    }
    return Error::success();
  }

private:
  const json::Object &object;
  StringRef source;
  StringRef prefix;
};

/// An integer, also when written as 5e8; nullopt for a fraction or a number
/// outside int64 (llvm::json would convert 2^63 written as a double, which
/// is undefined behaviour).
std::optional<int64_t> integerOf(const json::Value &v) {
  std::optional<double> d = v.getAsNumber();
  if (!d || !(*d > -0x1p63 && *d < 0x1p63))
    return std::nullopt;
  return v.getAsInteger();
}

template <> Error Reader::get(StringRef key, int64_t &out) {
  const json::Value *v = object.get(key);
  if (!v)
    return Error::success();
  std::optional<int64_t> i = integerOf(*v);
  if (!i)
    return error(key, v->getAsNumber() && std::trunc(*v->getAsNumber()) ==
                                              *v->getAsNumber()
                          ? "expects an integer below 2^63"
                          : "expects an integer");
  out = *i;
  return Error::success();
}

template <> Error Reader::get(StringRef key, double &out) {
  const json::Value *v = object.get(key);
  if (!v)
    return Error::success();
  std::optional<double> d = v->getAsNumber();
  if (!d)
    return error(key, "expects a number");
  out = *d;
  return Error::success();
}

template <> Error Reader::get(StringRef key, bool &out) {
  const json::Value *v = object.get(key);
  if (!v)
    return Error::success();
  std::optional<bool> b = v->getAsBoolean();
  if (!b)
    return error(key, "expects true or false");
  out = *b;
  return Error::success();
}

template <> Error Reader::get(StringRef key, std::string &out) {
  const json::Value *v = object.get(key);
  if (!v)
    return Error::success();
  std::optional<StringRef> s = v->getAsString();
  if (!s)
    return error(key, "expects a string");
  out = s->str();
  return Error::success();
}

Error positive(Reader &r, StringRef key, int64_t value) {
  if (value < 1)
    return r.error(key, formatv("must be at least 1, got {0}", value));
  return Error::success();
}

/// A value as a message shows it: numbers as %g ("0.1", not
/// 0.10000000000000001 or 0.10).
std::string shown(const json::Value &v) {
  if (std::optional<int64_t> i = v.getAsInteger())
    return std::to_string(*i);
  if (std::optional<double> d = v.getAsNumber())
    return formatv("{0}", format("%g", *d)).str();
  if (const json::Array *a = v.getAsArray()) {
    std::string text = "[";
    for (size_t i = 0; i < a->size(); ++i)
      text += (i ? ", " : "") + shown((*a)[i]);
    return text + "]";
  }
  return formatv("{0}", v).str();
}

/// A key that must be a non-negative integer, if given.
Error nonNegativeInteger(Reader &r, const json::Object &object, StringRef key,
                         int64_t &out) {
  const json::Value *v = object.get(key);
  if (!v)
    return Error::success();
  std::optional<int64_t> i = integerOf(*v);
  if (!i || *i < 0)
    return r.error(key, "must be a non-negative integer, got " + shown(*v));
  out = *i;
  return Error::success();
}

/// The `optimizer` object: AdamW or SGD hyper-parameters, gradient clipping
/// and the learning-rate schedule (linear warmup, then a cosine decay).
/// activation_checkpointing (SMP's strategies), SMP v1's
/// checkpoint_attentions (the attention core only: `selective`) and the
/// layer prefixes for models whose layers cannot be found from the graph.
Error readActivationCheckpointing(Reader &r, const json::Object &object,
                                  Spec &spec) {
  std::string &strategy = spec.activationCheckpointing;
  StringRef s = strategy;
  int64_t group = 0;
  // "none" switches checkpointing off and leaves the layer list alone (a
  // --set that turns it off for one run).
  bool off = s == "none";
  if (off) {
    strategy.clear();
  } else if (s.consume_front("group_")) {
    if (s.getAsInteger(10, group) || group < 1)
      return r.error("activation_checkpointing",
                     "'" + strategy + "' needs a group size of at least 1 "
                     "after 'group_' (e.g. \"group_2\": two consecutive "
                     "layers a segment)");
  } else if (!s.empty() && s != "each" && s != "contiguous" &&
             s != "selective") {
    return r.error("activation_checkpointing",
                   "unknown strategy '" + strategy + "'; use \"each\", "
                   "\"group_<k>\", \"contiguous\", \"selective\" or "
                   "\"none\"");
  }
  bool attentions = false;
  if (Error e = r.get("checkpoint_attentions", attentions))
    return e;
  if (attentions) {
    if (!strategy.empty() && strategy != "selective")
      return r.error("checkpoint_attentions",
                     "recomputes the attention core (activation_checkpointing "
                     "\"selective\"), but activation_checkpointing is \"" +
                         strategy + "\"; keep one of the two");
    strategy = "selective";
  }
  if (const json::Value *layers = object.get("activation_checkpointing_layers")) {
    const json::Array *list = layers->getAsArray();
    if (!list)
      return r.error("activation_checkpointing_layers",
                     "expects a list of ONNX node-name prefixes, one a "
                     "layer, e.g. [\"/blocks.0/\", \"/blocks.1/\"]");
    for (const json::Value &v : *list) {
      auto prefix = v.getAsString();
      if (!prefix || prefix->empty())
        return r.error("activation_checkpointing_layers",
                       "expects a list of non-empty ONNX node-name prefixes");
      spec.activationCheckpointingLayers.push_back(prefix->str());
    }
    if (off)
      spec.activationCheckpointingLayers.clear();
    else if (strategy.empty() || strategy == "selective")
      return r.error("activation_checkpointing_layers",
                     "names the layers that activation_checkpointing "
                     "recomputes, but it is " +
                         Twine(strategy.empty() ? "not set" : "\"selective\"") +
                         "; set it to \"each\", \"group_<k>\" or "
                         "\"contiguous\"");
  }
  return Error::success();
}

/// offload_activations (SMP v1) or sm_activation_offloading (SMP v2) and
/// activation_loading_horizon: the checkpoints go to host memory after
/// their forward and come back `horizon` segments before their backward.
/// Offload moves checkpoints, so it needs activation_checkpointing (SMP's
/// rule). SMP v2's key chooses SMP's offload implementation for the
/// checkpointed modules and is true by default, so a v2 configuration
/// that gives it without checkpointing offloads nothing (a note), as SMP
/// v2 would; SMP v1's key asks for offload and is an error there.
Error readActivationOffloading(Reader &r, const json::Object &object,
                               Spec &spec, bool smpV2) {
  bool v1 = false, v2 = false;
  if (Error e = r.get("offload_activations", v1))
    return e;
  if (Error e = r.get("sm_activation_offloading", v2))
    return e;
  bool hasV1 = object.get("offload_activations") != nullptr;
  bool hasV2 = object.get("sm_activation_offloading") != nullptr;
  if (hasV1 && hasV2 && v1 != v2)
    return r.error("offload_activations",
                   formatv("is {0}, but 'sm_activation_offloading' (SMP v2's "
                           "name of the same setting) is {1}; give one, or "
                           "the same value to both",
                           v1, v2));
  bool checkpointing = !spec.activationCheckpointing.empty() &&
                       spec.activationCheckpointing != "selective";
  if (v1 && !checkpointing)
    return r.error("offload_activations",
                   spec.activationCheckpointing == "selective"
                       ? Twine("moves the checkpoints of layer segments to "
                               "host memory, but activation_checkpointing "
                               "\"selective\" keeps no layer checkpoints; "
                               "set 'activation_checkpointing' to \"each\", "
                               "\"group_<k>\" or \"contiguous\"")
                       : Twine("moves the checkpoints to host memory and "
                               "needs activation checkpointing (as SMP "
                               "does); set 'activation_checkpointing' (e.g. "
                               "\"each\") or remove this key"));
  spec.offloadActivations = v1 || (v2 && checkpointing);
  spec.activationLoadingHorizon = smpV2 ? 2 : 4; // SMP's documented defaults
  if (const json::Value *v = object.get("activation_loading_horizon")) {
    std::optional<int64_t> horizon = integerOf(*v);
    if (!horizon)
      return r.error("activation_loading_horizon",
                     "expects an integer, got " + shown(*v));
    if (*horizon < 1)
      return r.error("activation_loading_horizon",
                     formatv("must be at least 1, got {0}: it is how many "
                             "segments ahead of its backward a checkpoint is "
                             "fetched back",
                             *horizon));
    spec.activationLoadingHorizon = *horizon;
  }
  return Error::success();
}

Error readOptimizer(const json::Value &value, StringRef source,
                    cleave::OptimizerSpec &out) {
  const json::Object *object = value.getAsObject();
  if (!object)
    return fail(source + ": spec key 'optimizer': expects an object such as "
                         "{\"type\": \"adamw\", \"lr\": 1e-3}");
  Reader r(*object, source, "optimizer.");
  if (Error e = r.unknownKeys({"type", "lr", "betas", "eps", "weight_decay",
                               "grad_clip", "momentum", "warmup_steps",
                               "lr_decay_steps", "min_lr"}))
    return e;
  if (Error e = r.get("type", out.type))
    return e;
  if (out.type != "adamw" && out.type != "sgd")
    return r.error("type", "must be \"adamw\" or \"sgd\", got \"" + out.type +
                               "\"");
  for (auto [key, field] : {std::pair{"lr", &out.lr},
                            std::pair{"eps", &out.eps},
                            std::pair{"weight_decay", &out.weightDecay},
                            std::pair{"grad_clip", &out.gradClip},
                            std::pair{"momentum", &out.momentum},
                            std::pair{"min_lr", &out.minLr}}) {
    if (Error e = r.get(key, *field))
      return e;
    if (*field < 0)
      return r.error(key, "must not be negative, got " + shown(*field));
  }
  if (const json::Value *betas = object->get("betas")) {
    const json::Array *a = betas->getAsArray();
    std::optional<double> b1, b2;
    if (a && a->size() == 2) {
      b1 = (*a)[0].getAsNumber();
      b2 = (*a)[1].getAsNumber();
    }
    if (!b1 || !b2 || *b1 < 0 || *b1 >= 1 || *b2 < 0 || *b2 >= 1)
      return r.error("betas", "expects two numbers in [0, 1), e.g. "
                              "[0.9, 0.95], got " +
                                  shown(*betas));
    out.beta1 = *b1;
    out.beta2 = *b2;
  }
  // A setting of the other optimizer is most likely a mistake in `type`.
  if (out.type == "adamw" && object->get("momentum"))
    return r.error("momentum", "is an sgd setting, but optimizer.type is "
                               "\"adamw\" (which takes betas)");
  if (out.type == "sgd")
    for (StringRef key : {"betas", "eps"})
      if (object->get(key))
        return r.error(key, "is an adamw setting, but optimizer.type is "
                            "\"sgd\"");

  if (Error e = nonNegativeInteger(r, *object, "warmup_steps", out.warmupSteps))
    return e;
  if (Error e = nonNegativeInteger(r, *object, "lr_decay_steps",
                                   out.decaySteps))
    return e;
  if (out.decaySteps != 0 && out.decaySteps <= out.warmupSteps)
    return r.error("lr_decay_steps",
                   formatv("is the step at which the decay reaches min_lr and "
                           "must exceed optimizer.warmup_steps ({0}), got {1}; "
                           "0 keeps lr constant after the warmup",
                           out.warmupSteps, out.decaySteps));
  if (object->get("min_lr")) {
    if (out.decaySteps == 0)
      return r.error("min_lr", "has no effect without optimizer."
                               "lr_decay_steps (the step at which the cosine "
                               "decay reaches it)");
    if (out.minLr > out.lr)
      return r.error("min_lr", "must not exceed optimizer.lr (" +
                                   shown(out.lr) + "), got " +
                                   shown(out.minLr));
  }
  return Error::success();
}

/// llvm::json's parser recurses once per level of nesting, so a document
/// nested a hundred thousand deep overflows the stack before it can report
/// anything. A spec nests six levels at most (distribution, smdistributed,
/// modelparallel, parameters, optimizer, betas); the levels are counted
/// first, outside strings, and a document ten times deeper is refused.
constexpr unsigned kMaxNesting = 64;

Error checkNesting(StringRef text, const Twine &what) {
  unsigned depth = 0;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        return fail(what +
                    formatv(": nested more than {0} levels deep at byte {1}; "
                            "a spec nests 6 at most (distribution, "
                            "smdistributed, modelparallel, parameters, "
                            "optimizer, betas)",
                            kMaxNesting, i));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Error::success();
}

/// JSON has no infinity, but 1e999 parses to one: every number in the spec,
/// at any depth, must be finite. Keys are visited in sorted order so the
/// first one reported does not depend on hashing.
Error checkFinite(const json::Value &v, const std::string &path,
                  StringRef source) {
  if (std::optional<double> d = v.getAsNumber()) {
    if (!std::isfinite(*d))
      return fail(source + ": spec key '" + path +
                  "': is not a finite number (it overflows a double); give a "
                  "value of at most 1.7e308");
    return Error::success();
  }
  if (const json::Object *o = v.getAsObject()) {
    std::vector<std::string> keys;
    for (const auto &entry : *o)
      keys.push_back(entry.first.str());
    llvm::sort(keys);
    for (const std::string &k : keys)
      if (Error e = checkFinite(*o->get(k), path.empty() ? k : path + "." + k,
                                source))
        return e;
  }
  if (const json::Array *a = v.getAsArray())
    for (size_t i = 0; i < a->size(); ++i)
      if (Error e =
              checkFinite((*a)[i], path + "[" + std::to_string(i) + "]", source))
        return e;
  return Error::success();
}

/// Keys that are the same setting as one of Cleave's: SMP v1's `partitions`
/// and Megatron-LM's `global_batch_size`. (SMP v2's `hybrid_shard_degree`
/// has its own default, 0, and is read on its own.)
constexpr std::pair<const char *, const char *> kAliases[] = {
    {"partitions", "pipeline_parallel_degree"},
    {"global_batch_size", "batch_size"},
};

/// The estimator's `distribution` dictionary, flattened: SMP's parameters
/// come out of `smdistributed.modelparallel.parameters` and
/// `processes_per_host` out of `mpi`; Cleave's own keys (`world_size`,
/// `batch_size`...) may sit beside them. `smpV2` is set for SMP v2's
/// `torch_distributed` launch.
Error flattenDistribution(json::Object &object, StringRef source,
                          Reader &top, std::vector<cleave::SpecNote> &notes,
                          bool &smpV2) {
  if (!object.get("smdistributed") && !object.get("mpi") &&
      !object.get("torch_distributed"))
    return Error::success();
  auto enabled = [&](Reader &r, StringRef launcher) -> Error {
    bool on = true;
    if (Error e = r.get("enabled", on))
      return e;
    if (!on)
      return r.error("enabled",
                     "is false, so SageMaker would not launch " + launcher +
                         "; set it to true (or give SMP's parameters alone)");
    return Error::success();
  };
  // The three blocks, taken out of the spec; each must be an object.
  std::optional<json::Object> blocks[3];
  const char *blockNames[3] = {"smdistributed", "mpi", "torch_distributed"};
  for (int i = 0; i < 3; ++i) {
    const json::Value *v = object.get(blockNames[i]);
    if (!v)
      continue;
    if (!v->getAsObject())
      return fail(source + ": spec key '" + blockNames[i] +
                  "': expects an object, as in SageMaker's distribution "
                  "dictionary");
    blocks[i] = *v->getAsObject();
    object.erase(blockNames[i]);
  }
  const json::Object *smd = blocks[0] ? &*blocks[0] : nullptr;
  const json::Object *mpi = blocks[1] ? &*blocks[1] : nullptr;
  const json::Object *torchDist = blocks[2] ? &*blocks[2] : nullptr;
  json::Object params;
  if (mpi && torchDist)
    return fail(source + ": spec keys 'mpi' and 'torch_distributed' are two "
                         "launchers: SMP v1 runs under mpi, SMP v2 under "
                         "torch_distributed; give one");
  if (torchDist) {
    Reader r(*torchDist, source, "torch_distributed.");
    if (Error e = r.unknownKeys({"enabled"}))
      return e;
    if (Error e = enabled(r, "torchrun"))
      return e;
    smpV2 = true;
  }
  if (smd) {
    Reader r(*smd, source, "smdistributed.");
    if (smd->get("dataparallel"))
      return r.error("dataparallel",
                     "is SMDDP, SageMaker's data-parallel library; Cleave's "
                     "data parallelism is 'ddp': true among the modelparallel "
                     "parameters");
    if (Error e = r.unknownKeys({"modelparallel"}))
      return e;
    const json::Value *mpValue = smd->get("modelparallel");
    const json::Object *mp = mpValue ? mpValue->getAsObject() : nullptr;
    if (!mp)
      return fail(source + ": spec key 'smdistributed.modelparallel': "
                           "expects an object {\"enabled\": true, "
                           "\"parameters\": {...}} with SMP's parameters");
    Reader m(*mp, source, "smdistributed.modelparallel.");
    if (Error e = m.unknownKeys({"enabled", "parameters"}))
      return e;
    if (Error e = enabled(m, "SMP"))
      return e;
    if (const json::Value *p = mp->get("parameters")) {
      if (p->getAsString())
        return m.error("parameters",
                       "is a file path; give that file itself to --spec "
                       "(Cleave reads SMP's parameters file as written), or "
                       "put its object here");
      if (!p->getAsObject())
        return m.error("parameters", "expects an object of SMP's parameters");
      params = *p->getAsObject();
    }
  }
  if (mpi) {
    Reader r(*mpi, source, "mpi.");
    if (Error e = r.unknownKeys(
            {"enabled", "processes_per_host", "custom_mpi_options"}))
      return e;
    if (Error e = enabled(r, "the MPI job SMP v1 runs in"))
      return e;
    if (const json::Value *n = mpi->get("processes_per_host")) {
      if (object.get("processes_per_host") || params.get("processes_per_host"))
        return fail(source + ": spec keys 'mpi.processes_per_host' and "
                             "'processes_per_host' are the same setting; "
                             "give one");
      object["processes_per_host"] = *n;
      top.writtenAs["processes_per_host"] = "mpi.processes_per_host";
    }
    if (const json::Value *options = mpi->get("custom_mpi_options")) {
      if (!options->getAsString())
        return r.error("custom_mpi_options", "expects a string of mpirun "
                                             "flags");
      notes.push_back({"mpi.custom_mpi_options", formatv("{0}", *options),
                       "flags for mpirun: give them to the mpirun that "
                       "launches cleave-run; the programs are the same"});
    }
  }
  for (auto &entry : params) {
    if (object.get(entry.first))
      return fail(source + ": spec key '" + StringRef(entry.first) +
                  "' is given both in smdistributed.modelparallel.parameters "
                  "and beside it; give it once");
    object[entry.first] = entry.second;
  }
  return Error::success();
}

/// What a key SMP documents is to Cleave besides the implemented ones.
enum class KeyUse {
  /// Not implemented yet: accepted at its documented default only.
  DefaultOnly,
  /// Means nothing to an ahead-of-time compiler: any valid value is
  /// accepted, with a note in plan.json saying why it changes nothing.
  Note,
};
enum class KeyType { Bool, Integer, Number, String };

struct KeyRule {
  const char *key;
  KeyUse use;
  KeyType type;
  const char *defaultJson; // SMP's documented default; "null" where none
  const char *why; // DefaultOnly: the error's reason; Note: the note
  int64_t min = 0; // Integer: the least value SMP allows
  const char *requires = nullptr; // a boolean key that must be true
  const char *choices = nullptr;  // String: the values allowed, '|'-separated
};

constexpr const char *kSdp =
    "is a setting of sharded data parallelism that Cleave does not implement "
    "yet";
constexpr const char *kNotOffloaded =
    "tunes activation offloading, and nothing is offloaded "
    "('offload_activations' is false)";
constexpr const char *kRunTime =
    "is a switch of SMP's run-time tracing and dispatch; Cleave compiles the "
    "whole step ahead of time";

/// Every documented SMP v1 and v2 key that Spec does not read itself
/// (/work/shared/SMP-KEYS.md; docs/spec-keys.md).
const KeyRule kRules[] = {
    // Not implemented yet: their defaults only.
    {"context_parallel_degree", KeyUse::DefaultOnly, KeyType::Integer, "1",
     "is not implemented yet (context parallelism)", 1},
    {"expert_parallel_degree", KeyUse::DefaultOnly, KeyType::Integer, "1",
     "is not implemented yet (expert parallelism)", 1},
    {"sdp_gradient_clipping", KeyUse::DefaultOnly, KeyType::Number, "1.0",
     kSdp},
    {"_sharded_data_parallelism_config", KeyUse::DefaultOnly, KeyType::String,
     "null", kSdp},
    {"allow_empty_shards", KeyUse::DefaultOnly, KeyType::Bool, "false", kSdp},
    {"_shard_offloaded_activations", KeyUse::DefaultOnly, KeyType::Bool,
     "true", "is not implemented yet (activation offloading)"},
    {"_fp32_grad_accumulation", KeyUse::DefaultOnly, KeyType::Bool, "false",
     "is not implemented yet (fp32 gradient accumulation under fp16)"},
    {"fp16_params", KeyUse::DefaultOnly, KeyType::Bool, "false",
     "is deprecated by SMP in favour of 'fp16', which Cleave implements (use "
     "'fp16': true)"},
    {"horovod", KeyUse::DefaultOnly, KeyType::Bool, "false",
     "is Horovod, TensorFlow's data parallelism; Cleave's is 'ddp': true"},
    {"herring", KeyUse::DefaultOnly, KeyType::Bool, "false",
     "selects SMDDP, SageMaker's data-parallel library; Cleave's data "
     "parallelism is 'ddp': true"},
    {"contiguous", KeyUse::DefaultOnly, KeyType::Bool, "true",
     "is a TensorFlow option; Cleave's pipeline stages are always contiguous"},
    {"load_partition", KeyUse::DefaultOnly, KeyType::Bool, "false",
     "is a TensorFlow option; Cleave's manual split is 'partition_points'"},
    {"partition_file", KeyUse::DefaultOnly, KeyType::String, "null",
     "is a TensorFlow option; Cleave's manual split is 'partition_points'"},

    // Nothing to a compiler: accepted, with a note in plan.json.
    {"skip_tracing", KeyUse::Note, KeyType::Bool, "false",
     "Cleave reads the exported ONNX graph; there is no tracing pass to skip"},
    {"fast_mode", KeyUse::Note, KeyType::Bool, "false", kRunTime},
    {"static_mode", KeyUse::Note, KeyType::Bool, "false", kRunTime},
    {"_match_weights", KeyUse::Note, KeyType::Bool, "false",
     "is an SMP-internal run-time switch; Cleave's parameters are the ONNX "
     "initializers, by name"},
    {"deterministic_server", KeyUse::Note, KeyType::Bool, "false",
     "orders SMP's run-time execution alike on every data-parallel rank; a "
     "compiled program already runs one fixed order on every rank"},
    {"ddp_dist_backend", KeyUse::Note, KeyType::String, "\"auto\"",
     "chooses the library behind SMP's run-time collectives; the programs "
     "name their collectives and cleave-run runs them with MPI on the CPU "
     "and NCCL on GPUs",
     0, "ddp", "auto|nccl"},
    {"ddp_port", KeyUse::Note, KeyType::Integer, "null",
     "is the port of PyTorch DDP's rendezvous; cleave-run's ranks meet "
     "through MPI",
     0, "ddp"},
    {"fsdp_cache_flush_warnings", KeyUse::Note, KeyType::Bool, "true",
     "warns when PyTorch's caching allocator flushes; Cleave plans every "
     "buffer ahead of time and allocates once"},
    {"sm_activation_offloading", KeyUse::Note, KeyType::Bool, "true",
     "chooses SMP's offload for the checkpointed modules; without "
     "'activation_checkpointing' nothing is checkpointed, so nothing is "
     "offloaded"},
    {"activation_loading_horizon", KeyUse::Note, KeyType::Integer, "4",
     kNotOffloaded, 0},
    {"task_level_activation_loading_horizon", KeyUse::Note, KeyType::Integer,
     "4", kNotOffloaded, 1},
    {"tensor_parallel_seed", KeyUse::Note, KeyType::Integer, "0",
     "seeds the initialization of tensor-split parameters, which this plan "
     "does not have (tensor_parallel_degree is 1); the initialization seed "
     "is 'seed'",
     0},
    {"random_seed", KeyUse::Note, KeyType::Integer, "null",
     "seeds SMP v2's tensor- and expert-parallel random streams, which this "
     "plan does not have; the initialization seed is 'seed'",
     0},
};

/// Checks one key of kRules: its type, bound and requirement; a default-only
/// key's value; a note for a key that changes nothing.
Error checkRule(Reader &r, const json::Object &object, const KeyRule &rule,
                const json::Value &v, std::vector<cleave::SpecNote> &notes) {
  Expected<json::Value> def = json::parse(rule.defaultJson);
  if (!def)
    return def.takeError();
  bool isDefault = true;
  if (v.getAsNull()) {
    if (!def->getAsNull())
      return r.error(rule.key, "must not be null; its default is " +
                                   shown(*def));
    isDefault = true;
  } else {
    switch (rule.type) {
    case KeyType::Bool: {
      std::optional<bool> b = v.getAsBoolean();
      if (!b)
        return r.error(rule.key, "expects true or false, got " + shown(v));
      isDefault = def->getAsBoolean() == b;
      break;
    }
    case KeyType::Integer: {
      std::optional<int64_t> i = integerOf(v);
      if (!i)
        return r.error(rule.key, "expects an integer, got " + shown(v));
      if (*i < rule.min)
        return r.error(rule.key, formatv("must be at least {0}, got {1}",
                                         rule.min, *i));
      isDefault = integerOf(*def) == i;
      break;
    }
    case KeyType::Number: {
      std::optional<double> d = v.getAsNumber();
      if (!d)
        return r.error(rule.key, "expects a number, got " + shown(v));
      isDefault = def->getAsNumber() == d;
      break;
    }
    case KeyType::String: {
      std::optional<StringRef> s = v.getAsString();
      if (!s)
        return r.error(rule.key, "expects a string, got " + shown(v));
      if (rule.choices) {
        SmallVector<StringRef> choices;
        StringRef(rule.choices).split(choices, '|');
        if (!is_contained(choices, *s))
          return r.error(rule.key, formatv("must be one of \"{0}\", got {1}",
                                           join(choices, "\", \""),
                                           shown(v)));
      }
      isDefault = def->getAsString() == s;
      break;
    }
    }
  }
  if (rule.requires && object.getBoolean(rule.requires) != true)
    return r.error(rule.key, formatv("applies only with '{0}': true (as SMP "
                                     "checks); set it or remove this key",
                                     rule.requires));
  if (rule.use == KeyUse::DefaultOnly) {
    if (!isDefault)
      return r.error(rule.key, formatv("{0}; remove it or give its default, "
                                       "{1}",
                                       rule.why, shown(*def)));
    return Error::success();
  }
  notes.push_back({r.name(rule.key), formatv("{0}", v).str(), rule.why});
  return Error::success();
}

/// a x b, or an error naming the keys whose product overflows.
Expected<int64_t> product(int64_t a, int64_t b, const Twine &what) {
  int64_t out;
  if (MulOverflow(a, b, out))
    return fail(what + formatv(" = {0} x {1} overflows 64 bits", a, b));
  return out;
}

} // namespace

Expected<Spec> cleave::parseSpec(StringRef text, StringRef source,
                                 const std::vector<std::string> &overrides) {
  if (Error e = checkNesting(text, source))
    return std::move(e);
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return fail(source + ": not valid JSON: " + toString(parsed.takeError()));
  json::Object *object = parsed->getAsObject();
  if (!object)
    return fail(source + ": the spec must be a JSON object of keys, e.g. "
                         "{\"microbatches\": 4}");
  Spec spec;
  Reader r(*object, source);
  bool smpV2 = false;
  if (Error e = flattenDistribution(*object, source, r, spec.notes, smpV2))
    return std::move(e);
  for (const std::string &item : overrides) {
    auto [key, value] = StringRef(item).split('=');
    if (key.empty() || !StringRef(item).contains('='))
      return fail("--set expects KEY=VALUE, got '" + item + "'");
    // Keys and strings of JSON are UTF-8 (llvm::json asserts it).
    if (!json::isUTF8(item))
      return fail("--set " + json::fixUTF8(key) +
                  ": expects UTF-8 text, but the argument has bytes that are "
                  "not");
    if (Error e = checkNesting(value, "--set " + key))
      return std::move(e);
    // --set overrides the setting, whichever of its names the spec used.
    for (auto [alias, canonical] : kAliases)
      if (key == alias || key == canonical) {
        object->erase(alias);
        object->erase(canonical);
      }
    r.writtenAs.erase(key);
    Expected<json::Value> v = json::parse(value);
    if (v) {
      (*object)[key] = std::move(*v);
    } else {
      consumeError(v.takeError());
      (*object)[key] = value.str();
    }
  }
  if (Error e = checkFinite(*parsed, "", source))
    return std::move(e);
  for (auto [alias, key] : kAliases) {
    if (json::Value *v = object->get(alias)) {
      if (object->get(key))
        return fail(source + ": spec keys '" + alias + "' and '" + key +
                    "' are the same setting; give one");
      (*object)[key] = *v;
      object->erase(alias);
      r.writtenAs[key] = alias;
    }
  }
  // SMP v2's hybrid_shard_degree is SMP v1's sharded_data_parallel_degree
  // (MiCS groups of that many data ranks), with its own default: 0, which
  // SMP v2 gives to PyTorch FSDP over all data ranks and Cleave to
  // replicated parameters (as 1), with a note.
  if (const json::Value *v = object->get("hybrid_shard_degree")) {
    std::optional<int64_t> degree = integerOf(*v);
    if (!degree || *degree < 0)
      return r.error("hybrid_shard_degree",
                     "must be a non-negative integer, got " + shown(*v));
    if (const json::Value *v1 = object->get("sharded_data_parallel_degree")) {
      std::optional<int64_t> other = integerOf(*v1);
      if (!other || *other != std::max<int64_t>(*degree, 1))
        return fail(source + ": spec keys 'hybrid_shard_degree' (" +
                    shown(*v) + ") and 'sharded_data_parallel_degree' (" +
                    shown(*v1) +
                    ") are the same setting and differ; give one");
    }
    if (*degree == 0)
      spec.notes.push_back(
          {"hybrid_shard_degree", "0",
           "SMP v2 would shard parameters, gradients and optimizer state "
           "over all the data-parallel ranks (PyTorch FSDP); Cleave "
           "replicates them, as with 1: the same training, more memory per "
           "rank (give the data-parallel degree to shard over all of them)"});
    (*object)["sharded_data_parallel_degree"] = std::max<int64_t>(*degree, 1);
    r.writtenAs["sharded_data_parallel_degree"] = "hybrid_shard_degree";
    object->erase("hybrid_shard_degree");
    smpV2 = true;
  }
  // Keys only SMP v2 has.
  for (const char *key :
       {"sm_activation_offloading", "fsdp_cache_flush_warnings",
        "allow_empty_shards", "context_parallel_degree",
        "expert_parallel_degree", "random_seed"})
    if (object->get(key))
      smpV2 = true;

  StringSet<> known = {
      "pipeline_parallel_degree", "microbatches", "active_microbatches",
      "pipeline", "virtual_pipeline_degree", "auto_partition", "optimize",
      "memory_weight", "default_partition", "partition_points",
      "tensor_parallel_degree", "ddp", "shard_optimizer_state",
      "sharded_data_parallel_degree", "activation_checkpointing",
      "offload_activations", "bf16", "fp16", "dynamic_loss_scale",
      "init_scale", "scale_window", "min_scale", "delayed_shift",
      "delayed_parameter_initialization", "placement_strategy",
      "processes_per_host", "device", "device_memory_gib", "batch_size",
      "micro_batch_size", "prescaled_batch", "sequence_parallel", "optimizer", "seed",
      "world_size", "frozen_parameters", "checkpoint_attentions",
      "activation_checkpointing_layers", "sdp_param_persistence_threshold",
      "sdp_max_live_parameters", "sdp_reduce_bucket_size",
      "sdp_hierarchical_allgather", "sdp_prefetch_depth"};
  for (const KeyRule &rule : kRules)
    known.insert(rule.key);
  if (Error e = r.unknownKeys(known))
    return std::move(e);

  int64_t batch = 0;
  bool &autoPartition = spec.autoPartition;
  std::string &optimize = spec.optimize;
  double &memoryWeight = spec.memoryWeight;
  int64_t &defaultPartition = spec.defaultPartition;
  CLEAVE_SPEC_READ(r.get("pipeline_parallel_degree", spec.pipelineParallelDegree));
  CLEAVE_SPEC_READ(r.get("tensor_parallel_degree", spec.tensorParallelDegree));
  CLEAVE_SPEC_READ(r.get("sharded_data_parallel_degree", spec.shardedDataParallelDegree));
  CLEAVE_SPEC_READ(r.get("microbatches", spec.microbatches));
  CLEAVE_SPEC_READ(r.get("active_microbatches", spec.activeMicrobatches));
  CLEAVE_SPEC_READ(r.get("pipeline", spec.pipeline));
  CLEAVE_SPEC_READ(r.get("virtual_pipeline_degree", spec.virtualPipelineDegree));
  CLEAVE_SPEC_READ(r.get("ddp", spec.ddp));
  CLEAVE_SPEC_READ(r.get("shard_optimizer_state", spec.shardOptimizerState));
  CLEAVE_SPEC_READ(r.get("activation_checkpointing", spec.activationCheckpointing));
  CLEAVE_SPEC_READ(r.get("offload_activations", spec.offloadActivations));
  CLEAVE_SPEC_READ(r.get("bf16", spec.bf16));
  CLEAVE_SPEC_READ(r.get("fp16", spec.fp16));
  CLEAVE_SPEC_READ(r.get("delayed_parameter_initialization",
                         spec.delayedParameterInitialization));
  CLEAVE_SPEC_READ(r.get("sdp_param_persistence_threshold",
                         spec.sdpParamPersistenceThreshold));
  CLEAVE_SPEC_READ(r.get("sdp_hierarchical_allgather",
                         spec.sdpHierarchicalAllgather));
  if (spec.sdpParamPersistenceThreshold < 0)
    return r.error("sdp_param_persistence_threshold",
                   formatv("must not be negative, got {0} (parameters with "
                           "fewer elements stay whole on every rank; 0 "
                           "shards them all)",
                           spec.sdpParamPersistenceThreshold));
  CLEAVE_SPEC_READ(
      r.get("sdp_max_live_parameters", spec.sdpMaxLiveParameters));
  if (spec.sdpMaxLiveParameters < 0)
    return r.error("sdp_max_live_parameters",
                   formatv("must not be negative, got {0} (the elements of "
                           "gathered parameters live at once; 0 starts no "
                           "gather ahead of its reader)",
                           spec.sdpMaxLiveParameters));
  CLEAVE_SPEC_READ(r.get("sdp_prefetch_depth", spec.sdpPrefetchDepth));
  if (spec.sdpPrefetchDepth < 0)
    return r.error("sdp_prefetch_depth",
                   formatv("must not be negative, got {0} (each sharded "
                           "parameter's gather starts this many gathers "
                           "ahead of its reader; 0 gathers each just before "
                           "it)",
                           spec.sdpPrefetchDepth));
  CLEAVE_SPEC_READ(r.get("sdp_reduce_bucket_size", spec.sdpReduceBucketSize));
  if (spec.sdpReduceBucketSize < 0)
    return r.error("sdp_reduce_bucket_size",
                   formatv("must not be negative, got {0} (padded gradient "
                           "elements per reduce-scatter; 0 scatters each "
                           "gradient on its own, at once)",
                           spec.sdpReduceBucketSize));
  CLEAVE_SPEC_READ(r.get("placement_strategy", spec.placementStrategy));
  CLEAVE_SPEC_READ(r.get("processes_per_host", spec.processesPerHost));
  CLEAVE_SPEC_READ(r.get("device", spec.device));
  CLEAVE_SPEC_READ(r.get("device_memory_gib", spec.deviceMemoryGib));
  CLEAVE_SPEC_READ(r.get("batch_size", batch));
  CLEAVE_SPEC_READ(r.get("prescaled_batch", spec.prescaledBatch));
  CLEAVE_SPEC_READ(r.get("sequence_parallel", spec.sequenceParallel));
  CLEAVE_SPEC_READ(r.get("seed", spec.seed));
  CLEAVE_SPEC_READ(r.get("world_size", spec.worldSize));
  CLEAVE_SPEC_READ(r.get("auto_partition", autoPartition));
  CLEAVE_SPEC_READ(r.get("optimize", optimize));
  CLEAVE_SPEC_READ(r.get("memory_weight", memoryWeight));
  CLEAVE_SPEC_READ(r.get("dynamic_loss_scale", spec.dynamicLossScale));
  CLEAVE_SPEC_READ(r.get("init_scale", spec.initScale));
  CLEAVE_SPEC_READ(r.get("scale_window", spec.scaleWindow));
  CLEAVE_SPEC_READ(r.get("min_scale", spec.minScale));
  CLEAVE_SPEC_READ(r.get("delayed_shift", spec.delayedShift));
  if (const json::Value *v = object->get("default_partition"); !v || !v->getAsNull())
    CLEAVE_SPEC_READ(r.get("default_partition", defaultPartition));
  if (object->get("batch_size")) {
    if (batch < 1)
      return r.error("batch_size", formatv("must be at least 1, got {0}",
                                           batch));
    spec.batchSize = batch;
  }
  // SMP v2 has no `ddp` key: its data-parallel ranks always average their
  // gradients (FSDP), as 'ddp': true does here.
  if (smpV2 && !object->get("ddp"))
    spec.ddp = true;
  // Without world_size, an estimator's distribution dictionary describes one
  // host of mpi.processes_per_host ranks.
  if (!object->get("world_size") && object->get("processes_per_host") &&
      spec.processesPerHost >= 1) {
    spec.worldSize = spec.processesPerHost;
    spec.notes.push_back(
        {"world_size", std::to_string(spec.worldSize),
         "not given: the plan is for one host of " + r.name("processes_per_host") +
             " ranks; set world_size to instance_count x processes_per_host "
             "for more hosts"});
  }
  for (auto [key, value] :
       {std::pair{"pipeline_parallel_degree", spec.pipelineParallelDegree},
        std::pair{"tensor_parallel_degree", spec.tensorParallelDegree},
        std::pair{"sharded_data_parallel_degree",
                  spec.shardedDataParallelDegree},
        std::pair{"microbatches", spec.microbatches},
        std::pair{"virtual_pipeline_degree", spec.virtualPipelineDegree},
        std::pair{"world_size", spec.worldSize}})
    if (Error e = positive(r, key, value))
      return std::move(e);
  if (object->get("processes_per_host") && spec.processesPerHost < 1)
    return r.error("processes_per_host",
                   formatv("must be at least 1 (one process per GPU), got {0}",
                           spec.processesPerHost));
  // The program's rank numbers and microbatch indices are 32-bit
  // (runtime/program.proto), which bounds every degree and count below.
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  for (auto [key, value] : {std::pair{"world_size", spec.worldSize},
                            std::pair{"microbatches", spec.microbatches}})
    if (value > kInt32Max)
      return r.error(key, formatv("is {0}, more than the program format's "
                                  "32-bit rank and microbatch numbers hold "
                                  "({1})",
                                  value, kInt32Max));
  if (spec.activeMicrobatches < 0)
    return r.error("active_microbatches", "must not be negative");
  if (object->get("active_microbatches") &&
      (spec.activeMicrobatches < 1 ||
       spec.activeMicrobatches > spec.microbatches))
    return r.error("active_microbatches",
                   formatv("must be in [1, microbatches = {0}], got {1}",
                           spec.microbatches, spec.activeMicrobatches));
  if (spec.pipeline == "_only_forward")
    return r.error("pipeline", "is \"_only_forward\" (SMP's forward-only "
                               "pipeline), which is not implemented yet; "
                               "use \"simple\" or \"interleaved\"");
  if (spec.pipeline != "simple" && spec.pipeline != "interleaved" &&
      spec.pipeline != "interleaved_virtual")
    return r.error("pipeline", "must be \"simple\", \"interleaved\" or "
                               "\"interleaved_virtual\", got \"" +
                                   spec.pipeline + "\"");
  if (spec.device != "cpu" && spec.device != "cuda")
    return r.error("device", "must be \"cpu\" or \"cuda\", got \"" +
                                 spec.device + "\"");
  if (optimize != "speed" && optimize != "memory")
    return r.error("optimize", "must be \"speed\" or \"memory\", got \"" +
                                   optimize + "\"");
  if (memoryWeight < 0 || memoryWeight > 1)
    return r.error("memory_weight",
                   "must be in [0, 1], got " + shown(memoryWeight));
  if (spec.deviceMemoryGib < 0)
    return r.error("device_memory_gib", "must not be negative");
  if (spec.bf16 && spec.fp16)
    return fail(source + ": spec keys 'bf16' and 'fp16' are both true; "
                         "choose one precision");
  if (spec.dynamicLossScale && !spec.fp16)
    return r.error("dynamic_loss_scale",
                   "scales an fp16 loss; set 'fp16': true (bf16 and fp32 "
                   "need no loss scaling)");
  for (const char *key :
       {"init_scale", "scale_window", "min_scale", "delayed_shift"})
    if (object->get(key) && !spec.dynamicLossScale)
      return r.error(key, "applies only with 'dynamic_loss_scale': true");
  if (!(spec.initScale > 0))
    return r.error("init_scale", "must be positive");
  if (!(spec.minScale > 0) || spec.minScale > spec.initScale)
    return r.error("min_scale", "must be positive and at most init_scale");
  if (spec.scaleWindow < 1)
    return r.error("scale_window", "must be at least 1");
  if (spec.delayedShift < 1)
    return r.error("delayed_shift", "must be at least 1");
  if (spec.prescaledBatch && optimize != "speed")
    return r.error("prescaled_batch", "applies only with 'optimize': "
                                      "\"speed\" (as SMP checks)");
  // SMP: true, the ranks of a tensor-parallel group read the same batch,
  // tensor_parallel_degree times the per-rank one, and split it; false,
  // each reads its own and the group concatenates them. Here 'batch_size'
  // is the global batch and a group computes on its data rank's share:
  // with true every rank of the group reads that share, with false each
  // reads its part of every microbatch and the group all-gathers the token
  // ids (cleave-split-token-reads). The samples are the same either way
  // (docs/spec-keys.md).
  if (object->get("prescaled_batch"))
    spec.notes.push_back(
        {r.name("prescaled_batch"), spec.prescaledBatch ? "true" : "false",
         spec.tensorParallelDegree == 1
             ? "decides how the ranks of a tensor-parallel group read their "
               "samples; with tensor_parallel_degree 1 every group is one "
               "rank"
         : spec.prescaledBatch
             ? "every rank of a tensor-parallel group reads the group's "
               "samples (its data rank's share of 'batch_size', "
               "tensor_parallel_degree times SMP's per-rank batch); the "
               "numbers are those of false"
             : "each rank of a tensor-parallel group reads its part of "
               "every microbatch and the group all-gathers the token ids; "
               "the numbers are those of true"});
  // Megatron-LM turns sequence parallelism off with a warning when there
  // is no tensor parallelism; a note in the plan says the same.
  if (spec.sequenceParallel && spec.tensorParallelDegree == 1) {
    spec.notes.push_back(
        {r.name("sequence_parallel"), "true",
         "splits the sequence over the tensor-parallel group, and with "
         "tensor_parallel_degree 1 there is none: ignored (Megatron-LM "
         "disables it likewise)"});
    spec.sequenceParallel = false;
  }
  if (const json::Value *opt = object->get("optimizer"))
    if (Error e = readOptimizer(*opt, source, spec.optimizer))
      return std::move(e);
  if (const json::Value *frozen = object->get("frozen_parameters")) {
    const json::Array *list = frozen->getAsArray();
    if (!list)
      return r.error("frozen_parameters",
                     "expects a list of initializer names or glob patterns, "
                     "e.g. [\"cos\", \"sin\", \"*.rotary.*\"]");
    for (const json::Value &v : *list) {
      auto name = v.getAsString();
      if (!name || name->empty())
        return r.error("frozen_parameters",
                       "expects a list of non-empty strings");
      spec.frozenParameters.push_back(name->str());
    }
  }

  if (Error e = readActivationCheckpointing(r, *object, spec))
    return std::move(e);
  if (Error e = readActivationOffloading(r, *object, spec, smpV2))
    return std::move(e);

  Expected<int64_t> stages =
      product(spec.pipelineParallelDegree, spec.virtualPipelineDegree,
              "spec keys '" + r.name("pipeline_parallel_degree") +
                  "' x 'virtual_pipeline_degree'");
  if (!stages)
    return stages.takeError();
  if (const json::Value *points = object->get("partition_points")) {
    const json::Array *list = points->getAsArray();
    if (!list)
      return r.error("partition_points",
                     "expects a list of ONNX node names, one per stage after "
                     "the first, e.g. [\"/h.2/ln_1/LayerNormalization\"]");
    for (const json::Value &v : *list) {
      auto name = v.getAsString();
      if (!name || name->empty())
        return r.error("partition_points", "expects a list of non-empty "
                                           "ONNX node names");
      spec.partitionPoints.push_back(name->str());
    }
    if (spec.autoPartition && object->get("auto_partition"))
      return r.error("partition_points",
                     "are manual split points; set 'auto_partition': false "
                     "to use them");
    spec.autoPartition = false;
  }
  // A program's schedule is a protobuf repeated field, which holds at most
  // 2^31 - 1 entries: a forward and a backward per microbatch and stage.
  if (Expected<int64_t> entries =
          product(2 * spec.microbatches, spec.virtualPipelineDegree,
                  "2 x spec keys 'microbatches' x 'virtual_pipeline_degree'");
      !entries || *entries > kInt32Max) {
    if (!entries)
      consumeError(entries.takeError());
    return r.error("microbatches",
                   formatv("is {0}, so a program's schedule would have 2 x {0} "
                           "x {1} (virtual_pipeline_degree) steps, more than "
                           "the program format's repeated field holds ({2})",
                           spec.microbatches, spec.virtualPipelineDegree,
                           kInt32Max));
  }
  if (!spec.autoPartition && (int64_t)spec.partitionPoints.size() != *stages - 1)
    return r.error(
        "partition_points",
        formatv("names {0} split point(s), but {1} stage(s) need {2}: one "
                "ONNX node name where each stage after the first begins (or "
                "set 'auto_partition': true)",
                spec.partitionPoints.size(), *stages, *stages - 1));
  if (defaultPartition != 0)
    return r.error("default_partition",
                   formatv("is {0}, but stages are contiguous and the ops "
                           "before the first partition point are stage 0; "
                           "remove it",
                           defaultPartition));
  if (spec.virtualPipelineDegree > 1 && spec.pipeline != "interleaved_virtual")
    return r.error("virtual_pipeline_degree",
                   formatv("is {0}, but virtual stages need 'pipeline': "
                           "\"interleaved_virtual\" (it is \"{1}\")",
                           spec.virtualPipelineDegree, spec.pipeline));
  if (spec.pipeline == "interleaved_virtual" && spec.virtualPipelineDegree < 2)
    return r.error("pipeline",
                   "is \"interleaved_virtual\", which needs "
                   "'virtual_pipeline_degree' of 2 or more (with one chunk per "
                   "rank use \"interleaved\")");
  if (spec.placementStrategy != "cluster" && spec.placementStrategy != "spread") {
    std::string order = spec.placementStrategy;
    std::string sorted = order;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != "DPT")
      return r.error("placement_strategy",
                     "must be \"cluster\", \"spread\" or an order of the "
                     "letters D (data), P (pipeline) and T (tensor) such as "
                     "\"DPT\", got \"" + order + "\"");
  }

  // Tensor parallelism (docs/tensor-parallel.md): a power of two within
  // a host, and only the compositions built so far (ZeRO-1 and sharded
  // data parallelism split each tensor rank's slice over its data group).
  if (int64_t tensor = spec.tensorParallelDegree; tensor > 1) {
    if ((tensor & (tensor - 1)) != 0)
      return r.error("tensor_parallel_degree",
                     formatv("is {0}, not a power of two; give 2, 4, 8...",
                             tensor));
    if (object->get("processes_per_host") && tensor > spec.processesPerHost)
      return r.error("tensor_parallel_degree",
                     formatv("is {0}, more than the {1} ranks of a host "
                             "('{2}'): a tensor-parallel group all-reduces "
                             "in every layer and stays within a host; give "
                             "at most {1}",
                             tensor, spec.processesPerHost,
                             r.name("processes_per_host")));
    // SMP seeds its tensor-parallel modules' random streams with it.
    // Here it seeds the generated initialization of the split parameters;
    // dropout is keyed by 'seed' and the global element in every layout
    // (docs/dropout.md).
    if (object->get("tensor_parallel_seed")) {
      int64_t seed = 0;
      CLEAVE_SPEC_READ(r.get("tensor_parallel_seed", seed));
      if (seed < 0)
        return r.error("tensor_parallel_seed",
                       formatv("must be at least 0 (SMP's bound), got {0}",
                               seed));
      spec.tensorParallelSeed = seed;
    }
  }
  // SMP's other documented keys: defaults only, or a note in the plan.
  for (const KeyRule &rule : kRules) {
    const json::Value *v = object->get(rule.key);
    if (!v)
      continue;
    KeyRule checked = rule;
    // Offload's keys, read by readActivationOffloading: notes only while
    // nothing is offloaded.
    StringRef key = rule.key;
    if (spec.offloadActivations &&
        (key == "sm_activation_offloading" ||
         key == "activation_loading_horizon"))
      continue;
    if (key == "activation_loading_horizon")
      checked.min = 1;
    if (key == "tensor_parallel_seed" && spec.tensorParallelSeed)
      continue;
    if (Error e = checkRule(r, *object, checked, *v, spec.notes))
      return std::move(e);
  }

  Expected<int64_t> modelRanks =
      product(spec.pipelineParallelDegree, spec.tensorParallelDegree,
              "spec keys '" + r.name("pipeline_parallel_degree") +
                  "' x 'tensor_parallel_degree'");
  if (!modelRanks)
    return modelRanks.takeError();
  int64_t dataDegree = spec.worldSize / *modelRanks;
  if (spec.worldSize % *modelRanks != 0)
    return r.error("world_size",
                   formatv("{0} is not a multiple of {1} x "
                           "tensor_parallel_degree = {2}",
                           spec.worldSize, r.name("pipeline_parallel_degree"),
                           *modelRanks));
  // A tensor-parallel group all-reduces in every layer: under the
  // placement's order (the rightmost letter fastest), its ranks are the
  // product of the degrees right of T apart, so the group spans that times
  // tensor_parallel_degree consecutive ranks, which must tile the hosts.
  if (int64_t tensor = spec.tensorParallelDegree;
      tensor > 1 && object->get("processes_per_host")) {
    std::string order = spec.placementStrategy == "cluster"  ? "DPT"
                        : spec.placementStrategy == "spread" ? "TPD"
                                                             : spec.placementStrategy;
    int64_t stride = 1;
    for (char axis : StringRef(order).substr(order.find('T') + 1))
      stride *= axis == 'D' ? dataDegree : spec.pipelineParallelDegree;
    int64_t span = stride * tensor;
    bool oneHost = spec.worldSize <= spec.processesPerHost;
    if (!oneHost && stride == 1 && spec.processesPerHost % tensor != 0)
      return r.error(
          "tensor_parallel_degree",
          formatv("is {0}, which does not divide the {1} ranks of a host "
                  "('{2}'): groups of {0} adjacent ranks would cross hosts; "
                  "give a divisor of {1}",
                  tensor, spec.processesPerHost,
                  r.name("processes_per_host")));
    if (!oneHost && spec.processesPerHost % span != 0)
      return r.error(
          "placement_strategy",
          formatv("is \"{0}\" (order {1}): a tensor-parallel group's {2} "
                  "ranks are {3} apart and span {4} consecutive ranks, which "
                  "do not fit the hosts of {5} ranks ('{6}'); give \"cluster\" "
                  "(tensor fastest: a group is {2} adjacent ranks)",
                  spec.placementStrategy, order, tensor, stride, span,
                  spec.processesPerHost, r.name("processes_per_host")));
  }
  // ZeRO-1 splits optimizer state over the data-parallel replicas: with
  // one there is nothing to split it over (SMP refuses it likewise).
  if (spec.shardOptimizerState && dataDegree < 2)
    return r.error("shard_optimizer_state",
                   formatv("is true, but {0} rank(s) over {1} x "
                           "tensor_parallel_degree leave {2} data-parallel "
                           "replica; give 'world_size' a multiple of {3} "
                           "(2 or more replicas) or set it to false",
                           spec.worldSize, r.name("pipeline_parallel_degree"),
                           dataDegree, 2 * *modelRanks));
  // Sharded data parallelism: groups of that many consecutive data ranks
  // (MiCS), so the degree divides the data-parallel degree.
  if (int64_t degree = spec.shardedDataParallelDegree; degree > 1) {
    if (dataDegree % degree != 0)
      return r.error("sharded_data_parallel_degree",
                     formatv("is {0}, which does not divide the {1} "
                             "data-parallel ranks ('world_size' {2} over {3} "
                             "x tensor_parallel_degree = {4}); give a divisor "
                             "of {1}",
                             degree, dataDegree, spec.worldSize,
                             r.name("pipeline_parallel_degree"), *modelRanks));
    if (spec.pipelineParallelDegree > 1)
      return r.error("sharded_data_parallel_degree",
                     formatv("is {0}, but '{1}' is {2}: sharded data "
                             "parallelism does not combine with pipeline "
                             "parallelism (SMP refuses it too); set one of "
                             "them to 1 (ZeRO-1, 'shard_optimizer_state', "
                             "does combine with pipelines)",
                             degree, r.name("pipeline_parallel_degree"),
                             spec.pipelineParallelDegree));
    if (spec.shardOptimizerState)
      return r.error("sharded_data_parallel_degree",
                     formatv("is {0}, which shards the optimizer state "
                             "already; remove 'shard_optimizer_state' (SMP "
                             "needs it false with sharded data parallelism)",
                             degree));
  }
  if (spec.delayedParameterInitialization &&
      spec.shardedDataParallelDegree < 2)
    spec.notes.push_back(
        {"delayed_parameter_initialization", "true",
         spec.tensorParallelDegree > 1
             ? "without sharded data parallelism every rank holds its whole "
               "tensor-parallel slice of each parameter, which it reads or "
               "generates directly into its own memory at start-up anyway; "
               "with it, each rank makes only its chunk of the slice"
             : "without sharded data parallelism every rank holds whole "
               "parameters, which it reads or generates directly into its "
               "own memory at start-up anyway; with it, each rank makes "
               "only its chunk"});
  if (dataDegree > 1 && !spec.ddp)
    return r.error("world_size",
                   formatv("{0} ranks leave {1} data-parallel replicas, which "
                           "need 'ddp': true to average their gradients",
                           spec.worldSize, dataDegree));

  // Megatron-LM's batch: global_batch_size (an alias of batch_size) and
  // micro_batch_size, the samples of one microbatch on one data rank.
  if (const json::Value *v = object->get("micro_batch_size")) {
    std::optional<int64_t> micro = integerOf(*v);
    if (!micro || *micro < 1)
      return r.error("micro_batch_size",
                     "must be a positive integer, got " + shown(*v));
    Expected<int64_t> perStep =
        product(*micro, dataDegree,
                "spec key 'micro_batch_size' x the data-parallel degree");
    if (!perStep)
      return perStep.takeError();
    if (!spec.batchSize) {
      Expected<int64_t> global =
          product(*perStep, spec.microbatches,
                  "spec keys 'micro_batch_size' x 'microbatches' x the "
                  "data-parallel degree");
      if (!global)
        return global.takeError();
      spec.batchSize = *global;
    } else if (*spec.batchSize % *perStep != 0) {
      return r.error("micro_batch_size",
                     formatv("is {0}, but {1} = {2} does not split into "
                             "microbatches of {0} on {3} data-parallel "
                             "rank(s); use a {1} that is a multiple of {4}",
                             *micro, r.name("batch_size"), *spec.batchSize,
                             dataDegree, *perStep));
    } else {
      int64_t microbatches = *spec.batchSize / *perStep;
      if (object->get("microbatches") && microbatches != spec.microbatches)
        return r.error("micro_batch_size",
                       formatv("is {0}, so {1} = {2} over {3} data-parallel "
                               "rank(s) makes {4} microbatches, but "
                               "'microbatches' is {5}; give one of the two",
                               *micro, r.name("batch_size"), *spec.batchSize,
                               dataDegree, microbatches, spec.microbatches));
      if (microbatches > kInt32Max)
        return r.error("micro_batch_size",
                       formatv("makes {0} microbatches, more than the program "
                               "format's 32-bit microbatch numbers hold",
                               microbatches));
      spec.microbatches = microbatches;
    }
  }
  if (spec.batchSize) {
    Expected<int64_t> perStep =
        product(spec.microbatches, dataDegree,
                "spec key 'microbatches' x the data-parallel degree");
    if (!perStep)
      return perStep.takeError();
    if (*perStep > *spec.batchSize)
      return r.error("microbatches",
                     formatv("{0} microbatches on each of {1} data-parallel "
                             "rank(s) need at least {2} samples, but {3} is "
                             "{4}; every microbatch takes one sample or more",
                             spec.microbatches, dataDegree, *perStep,
                             r.name("batch_size"), *spec.batchSize));
  }
  return spec;
}

Expected<Spec> cleave::readSpec(StringRef path,
                                const std::vector<std::string> &overrides) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return fail(path + ": cannot read the spec: " +
                buffer.getError().message());
  return parseSpec((*buffer)->getBuffer(), path, overrides);
}

/// The bytes of `n` ranks 0..n-1 as protobuf varints.
static uint64_t varintBytes(uint64_t n) {
  uint64_t bytes = 0, below = 0;
  for (unsigned width = 1; below < n; ++width) {
    uint64_t limit = width >= 9 ? n : std::min<uint64_t>(n, 1ull << (7 * width));
    bytes += (limit - below) * width;
    below = limit;
  }
  return bytes;
}

uint64_t cleave::scheduleEntriesPerProgram(const Spec &spec) {
  return SaturatingMultiply<uint64_t>(
      SaturatingMultiply<uint64_t>(2, uint64_t(spec.microbatches)),
      uint64_t(spec.virtualPipelineDegree));
}

/// The data-parallel degree of a spec parseSpec accepted.
static uint64_t dataDegreeOf(const Spec &spec) {
  uint64_t modelRanks = uint64_t(spec.pipelineParallelDegree) *
                        uint64_t(spec.tensorParallelDegree);
  return modelRanks ? uint64_t(spec.worldSize) / modelRanks : 0;
}

uint64_t cleave::programBytesLowerBound(const Spec &spec) {
  // Encoded, a schedule entry takes a tag and a length byte, and its
  // microbatch index a tag and a varint unless it is 0; the data group is
  // one varint per rank. Values parseSpec bounded to 32 bits, saturating
  // all the same.
  uint64_t m = uint64_t(spec.microbatches);
  uint64_t perMicrobatchIndices = varintBytes(m) - 1 + (m - 1); // m >= 1
  uint64_t entryBytes = SaturatingAdd<uint64_t>(
      SaturatingMultiply<uint64_t>(2, scheduleEntriesPerProgram(spec)),
      SaturatingMultiply<uint64_t>(
          2 * uint64_t(spec.virtualPipelineDegree), perMicrobatchIndices));
  uint64_t perProgram =
      SaturatingAdd<uint64_t>(entryBytes, varintBytes(dataDegreeOf(spec)));
  return SaturatingMultiply<uint64_t>(perProgram, uint64_t(spec.worldSize));
}

/// Bytes as a person reads them.
static std::string humanBytes(double bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  return u ? formatv("{0:F1} {1}", bytes, units[u]).str()
           : formatv("{0} bytes", int64_t(bytes)).str();
}

Error cleave::checkProgramsFit(const Spec &spec, const HostLimits &limits,
                               StringRef folder) {
  uint64_t data = dataDegreeOf(spec);
  uint64_t entries = scheduleEntriesPerProgram(spec);
  uint64_t onDisk = programBytesLowerBound(spec);
  if (onDisk > limits.freeDiskBytes) {
    // Name what makes them large: the rank count (each program lists its
    // data group, so the total grows as its square) or the schedule.
    bool ranks = varintBytes(data) >= SaturatingMultiply<uint64_t>(2, entries);
    return fail(formatv(
        "spec key '{0}': the programs would take at least {1} ({2}), more "
        "than the {3} free in '{4}'; nothing was written. {5}",
        ranks ? "world_size" : "microbatches", humanBytes(double(onDisk)),
        ranks ? formatv("{0} programs, each listing its {1} data-parallel "
                        "ranks",
                        spec.worldSize, data)
                    .str()
              : formatv("{0} program(s), each with a forward and a backward "
                        "step per microbatch: {1} steps",
                        spec.worldSize, entries)
                    .str(),
        humanBytes(double(limits.freeDiskBytes)), folder,
        ranks ? "Use fewer ranks (world_size), or more of them per model "
                "replica (pipeline_parallel_degree)"
              : "Use fewer microbatches, each with more samples"));
  }
  uint64_t inMemory =
      SaturatingMultiply<uint64_t>(entries, limits.scheduleEntryBytes);
  if (inMemory > limits.memoryBytes)
    return fail(formatv(
        "spec key 'microbatches': each program would hold {0} schedule steps "
        "(a forward and a backward per microbatch), at least {1} in memory "
        "as cleave-compile builds it and cleave-run loads it, more than this "
        "machine's {2}; nothing was written. Use fewer microbatches, each "
        "with more samples",
        entries, humanBytes(double(inMemory)),
        humanBytes(double(limits.memoryBytes))));
  return Error::success();
}

Expected<int64_t> cleave::microbatchSize(const Spec &spec,
                                         std::optional<int64_t> exported) {
  int64_t data = spec.worldSize /
                 (spec.pipelineParallelDegree * spec.tensorParallelDegree);
  int64_t perStep; // microbatches per step
  if (MulOverflow(data, spec.microbatches, perStep))
    return fail(formatv("spec key 'microbatches' = {0} x {1} data-parallel "
                        "ranks overflows 64 bits; every microbatch takes one "
                        "sample or more",
                        spec.microbatches, data));
  if (!spec.batchSize) {
    if (!exported)
      return fail("the model's batch axis is symbolic: give the global batch "
                  "with spec key 'batch_size' (or --set batch_size=N)");
    int64_t global;
    if (MulOverflow(*exported, perStep, global))
      return fail(formatv("the model's batch {0} x {1} microbatch(es) x {2} "
                          "data-parallel rank(s) overflows 64 bits; lower "
                          "'microbatches' or 'world_size'",
                          *exported, spec.microbatches, data));
    return *exported;
  }
  int64_t batch = *spec.batchSize;
  if (batch % perStep != 0)
    return fail(formatv("spec key 'batch_size' = {0} does not split into {1} "
                        "microbatches x {2} data-parallel ranks; use a "
                        "multiple of {3}",
                        batch, spec.microbatches, data, perStep));
  int64_t size = batch / perStep;
  if (exported && *exported != size) {
    int64_t fitBatch, perMicrobatch;
    if (MulOverflow(*exported, perStep, fitBatch) ||
        MulOverflow(*exported, data, perMicrobatch))
      return fail(formatv("the model was exported with batch {0}, but "
                          "batch_size {1} gives microbatches of {2}; export "
                          "with a dynamic batch axis",
                          *exported, batch, size));
    return fail(formatv(
        "the model was exported with batch {0}, but batch_size {1} over {2} "
        "microbatch(es) and {3} data-parallel rank(s) gives microbatches of "
        "{4}; set batch_size to {5} (or microbatches to {6}), or export with "
        "a dynamic batch axis",
        *exported, batch, spec.microbatches, data, size, fitBatch,
        batch % perMicrobatch == 0 ? batch / perMicrobatch
                                   : spec.microbatches));
  }
  return size;
}
