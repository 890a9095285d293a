// The data pipeline: datasets, the real data loader (I/O, JPEG decoding, transforms,
// staging, its cache), the modelled loader, and the batch sources a job draws from.
//
// One header per concept (this one includes them all):
//   gpemu/pipeline/dataset.h
//   gpemu/pipeline/io.h
//   gpemu/pipeline/sampler.h
//   gpemu/pipeline/loader_cache.h
//   gpemu/pipeline/storage_model.h
//   gpemu/pipeline/staging.h
//   gpemu/pipeline/jpeg.h
//   gpemu/pipeline/transform.h
//   gpemu/pipeline/generator.h
//   gpemu/pipeline/loader.h
//   gpemu/pipeline/batch_source.h
//   gpemu/pipeline/distributed_cache.h
//   gpemu/pipeline/loader_model.h
#pragma once

#include "gpemu/pipeline/batch_source.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/distributed_cache.h"
#include "gpemu/pipeline/generator.h"
#include "gpemu/pipeline/io.h"
#include "gpemu/pipeline/jpeg.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/pipeline/loader_cache.h"
#include "gpemu/pipeline/loader_model.h"
#include "gpemu/pipeline/real_distributed_cache.h"
#include "gpemu/pipeline/sampler.h"
#include "gpemu/pipeline/staging.h"
#include "gpemu/pipeline/storage_model.h"
#include "gpemu/pipeline/transform.h"
