// Bottleneck ResNets as torchvision builds them (v1.5: the stride sits in the 3x3 conv), and
// Wide-ResNets (inner width scaled by width_per_group / 64). Scope names follow torchvision's
// modules ("layer3.5/conv2", "layer1.0/downsample.0") so exported plans map onto them.
#include <string>
#include <vector>

#include "../util/error.h"
#include "blocks.h"
#include "builder.h"
#include "models.h"

namespace tp {

namespace {

// Blocks per stage: a JSON array or, for --set, a text such as "3,4,23,3".
std::vector<std::int64_t> stageBlocks(const ModelConfig& c)
{
    std::vector<std::int64_t> blocks;
    auto bad = [&] {
        return InputError(configLabel(c) + ": field 'blocks' must list four positive block counts, e.g. [3,4,6,3]");
    };
    if (!c.contains("blocks")) throw InputError(configLabel(c) + ": field 'blocks' is missing");
    const auto& v = c["blocks"];
    if (v.is_array()) {
        for (const auto& n : v) {
            if (!n.is_number_integer() || n.get<std::int64_t>() <= 0) throw bad();
            blocks.push_back(n.get<std::int64_t>());
        }
    } else if (v.is_string()) {
        const std::string text = v.get<std::string>();
        size_t start = 0;
        while (start <= text.size()) {
            const size_t comma = std::min(text.find(',', start), text.size());
            const std::string item = text.substr(start, comma - start);
            if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 6) throw bad();
            blocks.push_back(std::stoll(item));
            if (blocks.back() <= 0) throw bad();
            start = comma + 1;
        }
    } else {
        throw bad();
    }
    if (blocks.size() != 4) throw bad();
    return blocks;
}

class ResNetBuilder {
public:
    explicit ResNetBuilder(GraphBuilder& g) : g_(g) {}

    TensorId conv(const std::string& name, TensorId x, std::int64_t out, std::int64_t kernel, std::int64_t stride)
    {
        const auto s = g_.shape(x);
        const std::int64_t pad = kernel / 2, size = (s[2] + 2 * pad - kernel) / stride + 1;
        return g_.op(OpKind::Conv2d, name, {x, g_.weight(name + ".weight", {out, s[1], kernel, kernel})}, {s[0], out, size, size},
                     {}, {{"stride", stride}, {"padding", pad}});
    }

    TensorId batchNorm(const std::string& name, TensorId x)
    {
        const auto s = g_.shape(x);
        return g_.op(OpKind::BatchNorm, name, {x, g_.weight(name + ".weight", {s[1]}), g_.weight(name + ".bias", {s[1]})}, s);
    }

    TensorId bottleneck(TensorId x, std::int64_t width, std::int64_t out, std::int64_t stride)
    {
        TensorId y = g_.unary(OpKind::ReLU, "relu1", batchNorm("bn1", conv("conv1", x, width, 1, 1)));
        y = g_.unary(OpKind::ReLU, "relu2", batchNorm("bn2", conv("conv2", y, width, 3, stride)));
        y = batchNorm("bn3", conv("conv3", y, out, 1, 1));
        TensorId identity = x;
        if (stride != 1 || g_.shape(x)[1] != out) identity = batchNorm("downsample.1", conv("downsample.0", x, out, 1, stride));
        return g_.unary(OpKind::ReLU, "relu3", g_.binary(OpKind::Add, "add", y, identity));
    }

private:
    GraphBuilder& g_;
};

} // namespace

Graph buildResNet(const ModelConfig& c)
{
    const std::vector<std::int64_t> blocks = stageBlocks(c);
    const std::int64_t widthPerGroup = configInt(c, "width_per_group", 64), classes = configInt(c, "classes", 1000);
    const std::int64_t image = configInt(c, "image", 224), batch = configInt(c, "batch", 1);
    if (image < 32) throw InputError(configLabel(c) + ": field 'image' must be at least 32 (five stride-2 stages)");

    GraphBuilder g(configString(c, "name", "resnet"), configDType(c));
    ResNetBuilder r(g);
    TensorId x = g.input("images", {batch, 3, image, image}, g.dtype());
    x = g.unary(OpKind::ReLU, "relu", r.batchNorm("bn1", r.conv("conv1", x, 64, 7, 2)));
    {
        const auto s = g.shape(x);
        const std::int64_t size = (s[2] + 2 - 3) / 2 + 1; // 3x3, stride 2, padding 1
        x = g.op(OpKind::MaxPool, "maxpool", {x}, {s[0], s[1], size, size}, {},
                 {{"kernel", std::int64_t{3}}, {"stride", std::int64_t{2}}, {"padding", std::int64_t{1}}});
    }
    for (size_t stage = 0; stage < blocks.size(); ++stage) {
        const std::int64_t planes = std::int64_t{64} << stage;
        const std::int64_t width = planes * widthPerGroup / 64, out = planes * 4;
        for (std::int64_t j = 0; j < blocks[stage]; ++j) {
            auto scope = g.scope("layer" + std::to_string(stage + 1) + "." + std::to_string(j));
            x = r.bottleneck(x, width, out, j == 0 && stage > 0 ? 2 : 1);
        }
    }
    x = g.op(OpKind::Reduce, "avgpool", {x}, {batch, g.shape(x)[1]}, {},
             {{"axes", std::vector<std::int64_t>{2, 3}}, {"reduction", std::string("mean")}});
    g.markOutput(crossEntropy(g, g.linear("fc", x, g.shape(x)[1], classes, true)));
    return g.take();
}

} // namespace tp
