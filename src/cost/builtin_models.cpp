// The built-in model table behind the default estimates (docs/cost-model.md).
//
// forward_gmacs and parameters: torchvision's weight metadata ("_ops" and
// "num_params", shown as GFLOPS and Params in the table of classification
// weights at https://docs.pytorch.org/vision/stable/models.html), 224x224.
// torchvision counts a multiply-add as one operation.
//
// transient_mib and activation_mib_per_sample: least-squares line through
//   peak - (12 B x parameters + batch x 602112 B)   [MiB]
// over the measured batch sizes (those below the extrapolated tail) of GPEmu's
// memory/Tesla_V100-PCIE-32GB/<model>/memory.csv. The test
// BuiltinModels.MemoryFitReproducesTheTable in tests/cost/default_estimate_test.cpp
// recomputes the fit from ../shared and prints replacement rows if it differs.
#include <algorithm>

#include "gpemu/cost_model.h"

namespace gpemu {

namespace {

// name, forward GMACs, parameters, transient MiB, activation MiB per sample
constexpr ModelFacts kModels[] = {
    {"alexnet", 0.714, 61100840, 146.552, 2.958},           {"densenet121", 2.834, 7978856, 28.834, 124.068},
    {"densenet169", 3.36, 14149480, 37.086, 149.963},       {"densenet201", 4.291, 20013928, 39.410, 193.694},
    {"googlenet", 1.498, 6624904, 37.516, 46.593},          {"mnasnet0_5", 0.104, 2218512, 11.222, 23.933},
    {"mnasnet0_75", 0.215, 3170208, 13.012, 36.897},        {"mnasnet1_0", 0.314, 4383312, 13.608, 42.168},
    {"mobilenet_v2", 0.301, 3504872, 14.105, 51.479},       {"mobilenet_v3_large", 0.217, 5483032, 15.135, 41.910},
    {"mobilenet_v3_small", 0.057, 2542856, 8.121, 15.116},  {"resnet101", 7.801, 44549160, 17.205, 121.259},
    {"resnet152", 11.514, 60192808, 31.973, 169.418},       {"resnet18", 1.814, 11689512, 9.581, 20.747},
    {"resnet34", 3.664, 21797672, 14.241, 30.299},          {"resnet50", 4.089, 25557032, 11.623, 82.155},
    {"resnext50_32x4d", 4.23, 25028904, 5.339, 107.352},    {"shufflenet_v2_x0_5", 0.04, 1366792, 3.759, 9.865},
    {"shufflenet_v2_x1_0", 0.145, 2278604, 13.178, 18.035}, {"shufflenet_v2_x1_5", 0.296, 3503624, 3.642, 25.338},
    {"squeezenet1_0", 0.819, 1248424, 6.892, 34.589},       {"squeezenet1_1", 0.349, 1235496, 5.379, 20.579},
    {"vgg11", 7.609, 132863336, 395.773, 46.048},           {"vgg11_bn", 7.609, 132868840, 396.061, 74.376},
    {"vgg13", 11.308, 133047848, 395.470, 64.425},          {"vgg13_bn", 11.308, 133053736, 396.383, 111.123},
    {"vgg16", 15.47, 138357544, 397.119, 69.395},           {"vgg16_bn", 15.47, 138365992, 397.799, 121.069},
    {"vgg19", 19.632, 143667240, 398.514, 74.365},          {"wide_resnet50_2", 11.398, 68883240, 13.626, 107.186},
};

}  // namespace

std::span<const ModelFacts> builtin_models() { return kModels; }

const ModelFacts* find_builtin_model(std::string_view name) {
  const std::string key = canonical_model_name(name);
  auto it = std::find_if(std::begin(kModels), std::end(kModels), [&](const ModelFacts& m) { return m.name == key; });
  return it == std::end(kModels) ? nullptr : &*it;
}

}  // namespace gpemu
