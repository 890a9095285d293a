// DLIO / MLPerf Storage workloads: configuration (gpemu/dlio/config.h),
// derived figures and AU (gpemu/dlio/figures.h), checkpointing
// (gpemu/dlio/checkpoint.h). docs/dlio.md describes what is supported.
#pragma once

#include "gpemu/dlio/checkpoint.h"
#include "gpemu/dlio/config.h"
#include "gpemu/dlio/figures.h"
