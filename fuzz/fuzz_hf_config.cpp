// The Hugging Face config.json reader and the model builders behind it: any bytes either build a
// graph or throw InputError. Builders must refuse absurd sizes rather than allocate them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/validate.h"
#include "import/hf_config.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const tp::ModelConfig config = tp::modelConfigFromHuggingFace(text, "config.json");
        const tp::Graph graph = tp::buildModel(config);
        tp::validateGraph(graph);
    } catch (const tp::InputError&) {}
    return 0;
}
