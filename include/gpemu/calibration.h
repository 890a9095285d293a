// The cost model's evidence: calibration against measured profiles and validation reports.
//
// One header per concept (this one includes them all):
//   gpemu/cost/calibration.h
//   gpemu/cost/validation.h
#pragma once

#include "gpemu/cost/calibration.h"
#include "gpemu/cost/validation.h"
