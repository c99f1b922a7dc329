// The small text parsers users type on the command line and files carry: tensor specs, op
// strategies, locks, byte quantities, mesh shapes and einsum equations. The first input byte
// picks the parser, the rest is the text. Any text is either parsed or refused with InputError;
// what parses must print back to text that parses to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "graph/signature.h"
#include "mesh/mesh.h"
#include "search/search.h"
#include "sharding/spec.h"
#include "sharding/strategy.h"
#include "util/error.h"
#include "util/units.h"

namespace {

// Built once: a 2x8 mesh and a column-parallel-able matmul, the shapes the parsers check against.
struct Fixture {
    tp::Hardware hardware = tp::loadHardware("a100-80g-dgx");
    tp::Mesh mesh = tp::parseMesh("2x8", hardware);
    std::vector<std::int64_t> activationShape{8, 128, 1024};
    tp::Signature matmul = tp::parseSignature("bsh,hf->bsf", {{8, 128, 1024}, {1024, 4096}}, {{8, 128, 4096}});
};

const Fixture& fixture()
{
    static const Fixture f;
    return f;
}

void parseOne(std::uint8_t selector, const std::string& text)
{
    const Fixture& f = fixture();
    switch (selector % 6) {
    case 0: {
        const tp::TensorSpec spec = tp::parseSpec(text, f.activationShape, f.mesh);
        if (tp::parseSpec(tp::specToString(spec, f.mesh), f.activationShape, f.mesh) != spec) std::abort();
        break;
    }
    case 1: {
        const tp::OpStrategy strategy = tp::parseStrategy(text, f.matmul, f.mesh);
        if (tp::parseStrategy(tp::strategyToString(strategy, f.matmul, f.mesh), f.matmul, f.mesh) != strategy) std::abort();
        break;
    }
    case 2: {
        const tp::LockRequest lock = tp::parseLockRequest(text);
        (void)tp::globMatch(lock.pattern, "layers.3/mlp/fc1");
        (void)tp::globMatch(lock.pattern, lock.strategy);
        break;
    }
    case 3:
        (void)tp::parseBytes(text);
        break;
    case 4: {
        const tp::Mesh mesh = tp::parseMesh(text, f.hardware);
        if (tp::parseMesh(mesh.shapeText(), f.hardware).shapeText() != mesh.shapeText()) std::abort();
        break;
    }
    case 5:
        // An equation over the fixture's operand shapes, as a graph file's "einsum" field.
        (void)tp::parseSignature(text, {{8, 128, 1024}, {1024, 4096}}, {{8, 128, 4096}});
        break;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0) return 0;
    try {
        parseOne(data[0], std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
    } catch (const tp::InputError&) {}
    return 0;
}
