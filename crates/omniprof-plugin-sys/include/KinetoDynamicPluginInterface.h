/*
 * KinetoDynamicPluginInterface.h: the name Kineto gives the plugin interface header, so that
 * a plugin written for Kineto includes omniprof's copy of the ABI without a source change.
 */
#ifndef OMNIPROF_KINETO_DYNAMIC_PLUGIN_INTERFACE_H
#define OMNIPROF_KINETO_DYNAMIC_PLUGIN_INTERFACE_H

#include "omniprof_plugin.h"

#endif /* OMNIPROF_KINETO_DYNAMIC_PLUGIN_INTERFACE_H */
