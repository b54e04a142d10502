//===- Spec.cpp - the parallelism spec of cleave-compile ------------------===//
//
// Every key of DESIGN.md's table is known here. Each is read with its type
// checked; `implemented` says whether a non-default value is accepted yet.
// Unknown keys, wrong types, impossible combinations and values of keys not
// implemented yet are errors that name the key and say what to change.
//
//===----------------------------------------------------------------------===//

#include "frontend/Spec.h"

#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

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

  Error error(StringRef key, const Twine &message) {
    return fail(source + ": spec key '" + prefix + key + "': " + message);
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
                       ? std::string("; see DESIGN.md, \"The spec\"")
                       : "; did you mean '" + prefix.str() + closest + "'?"));
    }
    return Error::success();
  }

private:
  const json::Object &object;
  StringRef source;
  StringRef prefix;
};

template <> Error Reader::get(StringRef key, int64_t &out) {
  const json::Value *v = object.get(key);
  if (!v)
    return Error::success();
  std::optional<int64_t> i = v->getAsInteger();
  if (!i)
    return error(key, "expects an integer");
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
  std::optional<int64_t> i = v->getAsInteger();
  if (!i || *i < 0)
    return r.error(key, "must be a non-negative integer, got " + shown(*v));
  out = *i;
  return Error::success();
}

/// The `optimizer` object: AdamW or SGD hyper-parameters, gradient clipping
/// and the learning-rate schedule (linear warmup, then a cosine decay).
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

} // namespace

Expected<Spec> cleave::parseSpec(StringRef text, StringRef source,
                                 const std::vector<std::string> &overrides) {
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return fail(source + ": not valid JSON: " + toString(parsed.takeError()));
  json::Object *object = parsed->getAsObject();
  if (!object)
    return fail(source + ": the spec must be a JSON object of keys, e.g. "
                         "{\"microbatches\": 4}");
  for (const std::string &item : overrides) {
    auto [key, value] = StringRef(item).split('=');
    if (key.empty() || !StringRef(item).contains('='))
      return fail("--set expects KEY=VALUE, got '" + item + "'");
    Expected<json::Value> v = json::parse(value);
    if (v) {
      (*object)[key] = std::move(*v);
    } else {
      consumeError(v.takeError());
      (*object)[key] = value.str();
    }
  }
  // SMP's aliases.
  for (auto [alias, key] :
       {std::pair{"partitions", "pipeline_parallel_degree"},
        std::pair{"hybrid_shard_degree", "sharded_data_parallel_degree"}}) {
    if (json::Value *v = object->get(alias)) {
      if (object->get(key))
        return fail(source + ": spec keys '" + alias + "' and '" + key +
                    "' are the same setting; give one");
      (*object)[key] = *v;
      object->erase(alias);
    }
  }

  Reader r(*object, source);
  if (Error e = r.unknownKeys(
          {"pipeline_parallel_degree", "microbatches", "active_microbatches",
           "pipeline", "virtual_pipeline_degree", "auto_partition", "optimize",
           "memory_weight", "default_partition", "partition_points",
           "tensor_parallel_degree", "tensor_parallel_seed", "ddp",
           "shard_optimizer_state", "sharded_data_parallel_degree",
           "activation_checkpointing", "offload_activations",
           "activation_loading_horizon", "bf16", "fp16", "dynamic_loss_scale",
           "init_scale", "scale_window", "min_scale", "delayed_shift",
           "delayed_parameter_initialization", "placement_strategy",
           "processes_per_host", "device", "device_memory_gib", "batch_size",
           "prescaled_batch", "optimizer", "seed", "world_size",
           "frozen_parameters"}))
    return std::move(e);

  Spec spec;
  int64_t batch = 0;
  bool &autoPartition = spec.autoPartition;
  std::string &optimize = spec.optimize;
  double &memoryWeight = spec.memoryWeight;
  int64_t tpSeed = 0, horizon = 4;
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
  CLEAVE_SPEC_READ(r.get("placement_strategy", spec.placementStrategy));
  CLEAVE_SPEC_READ(r.get("processes_per_host", spec.processesPerHost));
  CLEAVE_SPEC_READ(r.get("device", spec.device));
  CLEAVE_SPEC_READ(r.get("device_memory_gib", spec.deviceMemoryGib));
  CLEAVE_SPEC_READ(r.get("batch_size", batch));
  CLEAVE_SPEC_READ(r.get("prescaled_batch", spec.prescaledBatch));
  CLEAVE_SPEC_READ(r.get("seed", spec.seed));
  CLEAVE_SPEC_READ(r.get("world_size", spec.worldSize));
  CLEAVE_SPEC_READ(r.get("auto_partition", autoPartition));
  CLEAVE_SPEC_READ(r.get("optimize", optimize));
  CLEAVE_SPEC_READ(r.get("memory_weight", memoryWeight));
  CLEAVE_SPEC_READ(r.get("tensor_parallel_seed", tpSeed));
  CLEAVE_SPEC_READ(r.get("activation_loading_horizon", horizon));
  CLEAVE_SPEC_READ(r.get("dynamic_loss_scale", spec.dynamicLossScale));
  CLEAVE_SPEC_READ(r.get("init_scale", spec.initScale));
  CLEAVE_SPEC_READ(r.get("scale_window", spec.scaleWindow));
  CLEAVE_SPEC_READ(r.get("min_scale", spec.minScale));
  CLEAVE_SPEC_READ(r.get("delayed_shift", spec.delayedShift));
  CLEAVE_SPEC_READ(r.get("default_partition", defaultPartition));
  if (object->get("batch_size")) {
    if (batch < 1)
      return r.error("batch_size", formatv("must be at least 1, got {0}",
                                           batch));
    spec.batchSize = batch;
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
  if (spec.activeMicrobatches < 0)
    return r.error("active_microbatches", "must not be negative");
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
                   formatv("must be in [0, 1], got {0}", memoryWeight));
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
  if (!spec.autoPartition &&
      (int64_t)spec.partitionPoints.size() !=
          spec.pipelineParallelDegree * spec.virtualPipelineDegree - 1)
    return r.error(
        "partition_points",
        formatv("names {0} split point(s), but {1} stage(s) need {2}: one "
                "ONNX node name where each stage after the first begins (or "
                "set 'auto_partition': true)",
                spec.partitionPoints.size(),
                spec.pipelineParallelDegree * spec.virtualPipelineDegree,
                spec.pipelineParallelDegree * spec.virtualPipelineDegree - 1));
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

  // Features that later work brings: only their defaults for now.
  const char *parallel = "the parallel passes";
  CLEAVE_SPEC_READ(r.notYet<int64_t>("tensor_parallel_degree", 1, parallel));
  CLEAVE_SPEC_READ(r.notYet<int64_t>("sharded_data_parallel_degree", 1, parallel));
  CLEAVE_SPEC_READ(r.notYet<bool>("shard_optimizer_state", false, parallel));
  CLEAVE_SPEC_READ(r.notYet<std::string>("activation_checkpointing", "", "remat"));
  CLEAVE_SPEC_READ(r.notYet<bool>("offload_activations", false, "offload"));
  CLEAVE_SPEC_READ(r.notYet<bool>("delayed_parameter_initialization", false, parallel));
  int64_t dataDegree = spec.worldSize / (spec.pipelineParallelDegree *
                                         spec.tensorParallelDegree);
  if (spec.worldSize % (spec.pipelineParallelDegree *
                        spec.tensorParallelDegree) != 0)
    return r.error("world_size",
                   formatv("{0} is not a multiple of pipeline_parallel_degree "
                           "x tensor_parallel_degree = {1}",
                           spec.worldSize,
                           spec.pipelineParallelDegree *
                               spec.tensorParallelDegree));
  if (dataDegree > 1 && !spec.ddp)
    return r.error("world_size",
                   formatv("{0} ranks leave {1} data-parallel replicas, which "
                           "need 'ddp': true to average their gradients",
                           spec.worldSize, dataDegree));
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

Expected<int64_t> cleave::microbatchSize(const Spec &spec,
                                         std::optional<int64_t> exported) {
  int64_t data = spec.worldSize /
                 (spec.pipelineParallelDegree * spec.tensorParallelDegree);
  int64_t perStep = data * spec.microbatches; // microbatches per step
  if (!spec.batchSize) {
    if (!exported)
      return fail("the model's batch axis is symbolic: give the global batch "
                  "with spec key 'batch_size' (or --set batch_size=N)");
    return *exported;
  }
  int64_t batch = *spec.batchSize;
  if (batch % perStep != 0)
    return fail(formatv("spec key 'batch_size' = {0} does not split into {1} "
                        "microbatches x {2} data-parallel ranks; use a "
                        "multiple of {3}",
                        batch, spec.microbatches, data, perStep));
  int64_t size = batch / perStep;
  if (exported && *exported != size)
    return fail(formatv(
        "the model was exported with batch {0}, but batch_size {1} over {2} "
        "microbatch(es) and {3} data-parallel rank(s) gives microbatches of "
        "{4}; set batch_size to {5} (or microbatches to {6}), or export with "
        "a dynamic batch axis",
        *exported, batch, spec.microbatches, data, size,
        *exported * perStep,
        batch % (*exported * data) == 0 ? batch / (*exported * data)
                                        : spec.microbatches));
  return size;
}
