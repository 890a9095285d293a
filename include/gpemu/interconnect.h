// The interconnect layer: a node's GPUs and the links between them
// (interconnect/topology.h), collectives over them (interconnect/collectives.h)
// DDP-style gradient buckets (interconnect/gradient_buckets.h) and nodes
// joined by a network (interconnect/cluster.h).
// Overview, assumptions and sources: docs/interconnect.md.
#pragma once

#include "gpemu/interconnect/cluster.h"
#include "gpemu/interconnect/collectives.h"
#include "gpemu/interconnect/gradient_buckets.h"
#include "gpemu/interconnect/topology.h"
