"""The graph IR: devices, meshes, placements, sharding math, op kinds, params and operators.

Pure data and pure functions: nothing here executes a kernel or touches a runtime.
"""
