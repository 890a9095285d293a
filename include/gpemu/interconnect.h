// GPUs connected: topologies, collectives, DDP gradient buckets and clusters of nodes.
//
// One header per concept (this one includes them all):
//   gpemu/interconnect/topology.h
//   gpemu/interconnect/collectives.h
//   gpemu/interconnect/gradient_buckets.h
//   gpemu/interconnect/cluster.h
#pragma once

#include "gpemu/interconnect/cluster.h"
#include "gpemu/interconnect/collectives.h"
#include "gpemu/interconnect/gradient_buckets.h"
#include "gpemu/interconnect/topology.h"
