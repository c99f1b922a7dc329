#pragma once
// Verify a plan by running it: the planned model, shrunk to small sizes that keep every
// divisibility the plan needs, is executed on random tensors twice — once whole on one device
// (the reference), once as the plan says on simulated devices that each hold only their slices —
// and every op's outputs are compared.
//
// The sharded run executes what the plan FILE lists, as a runtime would: each op runs the
// strategy text stored for it (its loop ranges on each device follow from that text and the
// device's mesh coordinates), and where a consumer needs its input laid out differently from
// what the producer left, only the forward collectives the file lists after the producer's
// representative op are performed (all-reduce sums partial values over an axis group;
// all-gather concatenates slices; reduce-scatter sums then keeps a slice; all-to-all moves the
// split to another dim). A needed reduction the file does not list leaves the consumer with
// partial sums, and its result differs from the reference; a needed gather it does not list
// leaves a device without the data it needs. Nothing here asks the cost model which collectives
// a resharding needs.
//
// A plan of mode "train" also runs the backward pass: a random gradient is seeded at the
// model's outputs (the same on both runs) and propagated through every op in reverse. On the
// devices each op differentiates over its own loop box, so an input's gradient is partial over
// the mesh axes that split loops the input lacks. Where a tensor's gradient must reach its
// producer's layout, only the backward collectives the file lists after the producer's
// representative are performed; a weight's gradient is all-reduced over an axis only where the
// file lists a "gradient" all-reduce at an op that reads the weight (data parallelism). The
// gradient arriving at every op's outputs, the gradient each op sends to its inputs and every
// weight gradient are compared with the single-device backward.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tp::verify {

struct VerifyOptions {
    bool devicesAsThreads = false; ///< one thread per simulated device for each op's local compute
    double tolerance = 1e-3;       ///< max |sharded - reference| / max(1, max |reference|) per op
    std::uint64_t seed = 1;        ///< random tensors are a function of (seed, tensor name)
    /// Model overrides applied after shrinkOverrides() (e.g. a smaller image under sanitizers);
    /// they must keep every split of the plan divisible.
    std::vector<std::string> overrides;
    bool forwardOnly = false; ///< skip the backward pass of a train-mode plan
};

struct OpCheck {
    std::string name;
    std::string kind;
    std::string strategy;
    double maxError = 0; ///< relative, as VerifyOptions::tolerance measures it
    bool ok = true;
    std::string note; ///< e.g. which input arrived partial because a collective is missing
    /// Backward (train mode): max relative error over the gradient arriving at the op's outputs,
    /// the gradients it computes for its inputs, and the weight gradients completed at this op
    /// (a weight's gradient is complete at the first op that reads it).
    bool backwardRun = false;
    double backwardError = 0;
    bool backwardOk = true;
    std::string backwardNote;
    std::vector<std::string> weightGradients; ///< weights whose gradient was checked at this op
};

/// A collective the plan lists, and how often the sharded run performed it.
struct ListedCollective {
    std::string at, kind, axis;
    std::string phase = "forward"; ///< forward, backward or gradient
    int performed = 0;
    bool inShrunkModel = true; ///< false when the shrunk model has fewer blocks and lacks `at`
};

struct VerifyReport {
    bool passed = false;
    std::string failedOp;    ///< the first op whose sharded result differs (or cannot run)
    std::string failedPhase; ///< "forward" or "backward" (empty when passed)
    std::string message;     ///< one line: why it failed, or a summary when it passed
    std::string mesh;
    int devices = 1;
    std::string mode;                           ///< the plan's mode; "train" also executes the backward pass
    bool backward = false;                      ///< whether the backward pass was executed
    int weightGradients = 0;                    ///< weight gradients compared
    double forwardError = 0, backwardError = 0; ///< max over the ops
    std::vector<std::string> shrunk;            ///< the overrides that shrank the model ("hidden=64", ...)
    std::vector<OpCheck> ops;                   ///< every executed op, in topological order
    std::vector<ListedCollective> collectives;  ///< collectives listed in the plan, every phase
    std::vector<std::string> missing;           ///< collectives needed but not listed (one line each)
    /// Collectives performed although the plan does not list them (the gradient all-reduce of a
    /// weight's later reader, see verify.cpp); the plan's cost lacks them. One line each.
    std::vector<std::string> unlisted;
    int collectivesPerformed = 0;
};

/// Verifies a plan document (the .tpplan.json content). Throws InputError for a document it
/// cannot use (no model config to shrink, op names or einsums not matching, an op kind the
/// executor does not know), naming the op or field.
VerifyReport verifyPlan(const nlohmann::json& plan, const VerifyOptions& options = {});

/// The overrides verify applies to shrink a model config for a mesh of `devices` devices.
std::vector<std::string> shrinkOverrides(const nlohmann::json& config, int devices);

} // namespace tp::verify
