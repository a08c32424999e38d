// The whole public API.
#pragma once

#include "pagedattn/attention_layer.h"
#include "pagedattn/backend.h"
#include "pagedattn/config.h"
#include "pagedattn/device_info.h"
#include "pagedattn/kv_cache.h"
#include "pagedattn/metadata.h"
#include "pagedattn/ops.h"
#include "pagedattn/selector.h"
#include "pagedattn/status.h"
#include "pagedattn/tensor.h"
#include "pagedattn/types.h"
