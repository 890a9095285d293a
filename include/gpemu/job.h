// The training-job engine: a JobSpec, the Job that runs it on a clock, and its typed record.
//
// One header per concept (this one includes them all):
//   gpemu/job/memory_check.h
//   gpemu/job/spec.h
//   gpemu/job/step_program.h
//   gpemu/job/record.h
//   gpemu/job/summary.h
//   gpemu/job/predict_step.h
//   gpemu/job/predict.h
//   gpemu/job/job.h
#pragma once

#include "gpemu/job/job.h"
#include "gpemu/job/memory_check.h"
#include "gpemu/job/predict.h"
#include "gpemu/job/predict_step.h"
#include "gpemu/job/record.h"
#include "gpemu/job/spec.h"
#include "gpemu/job/step_program.h"
#include "gpemu/job/summary.h"
