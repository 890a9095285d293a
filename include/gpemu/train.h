// The train layer: what `gpemu train` and `gpemu analyze` add on top of the
// job (job.h): the JSON summary, run report and stall spans, the DataStall
// differential analysis, and the cache folder with the default dataset.
// Overview: docs/train.md.
//
//   train/outputs.h   JSON summary, run report, stall spans
//   train/analyze.h   the DataStall analysis (three runs of one job)
//   train/datasets.h  cache folder and the default synthetic dataset
#pragma once

#include "gpemu/job.h"
#include "gpemu/train/analyze.h"
#include "gpemu/train/datasets.h"
#include "gpemu/train/outputs.h"
