// What GPU work costs: measured profiles, the cost model that replays or predicts them,
// program variants, the analytical model and the zoo's memory plan.
//
// One header per concept (this one includes them all):
//   gpemu/cost/profile.h
//   gpemu/cost/cost_model.h
//   gpemu/cost/program_variant.h
//   gpemu/cost/analytical_model.h
//   gpemu/cost/zoo_memory.h
#pragma once

#include "gpemu/cost/analytical_model.h"
#include "gpemu/cost/cost_model.h"
#include "gpemu/cost/profile.h"
#include "gpemu/cost/program_variant.h"
#include "gpemu/cost/zoo_memory.h"
