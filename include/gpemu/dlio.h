// DLIO and MLPerf Storage workloads: configs, checkpoints, published figures and the runner.
//
// One header per concept (this one includes them all):
//   gpemu/dlio/config.h
//   gpemu/dlio/checkpoint.h
//   gpemu/dlio/figures.h
//   gpemu/dlio/data.h
//   gpemu/dlio/result.h
//   gpemu/dlio/runner.h
#pragma once

#include "gpemu/dlio/checkpoint.h"
#include "gpemu/dlio/config.h"
#include "gpemu/dlio/data.h"
#include "gpemu/dlio/figures.h"
#include "gpemu/dlio/result.h"
#include "gpemu/dlio/runner.h"
