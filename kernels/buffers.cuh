/* Device memory and transfers, and element-wise operations on whole buffers (buffers.cu). */
#ifndef TUPE_KERNELS_BUFFERS_CUH
#define TUPE_KERNELS_BUFFERS_CUH

#include "common.cuh"

tupe_dev *cu_alloc(tupe_backend *be, size_t bytes);
void cu_free(tupe_backend *be, tupe_dev *p);
/* Frees the upload staging buffers (at the backend's end, after a synchronization). */
void stage_destroy(cu_priv *pr);
void cu_upload(tupe_backend *be, tupe_dev *dst, const void *src, size_t n, int dt);
void cu_download(tupe_backend *be, void *dst, const tupe_dev *src, size_t n, int dt);
void cu_upload_ahead(tupe_backend *be, tupe_dev *dst, const void *src, size_t n, int dt);
void cu_ahead_take(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, size_t bytes);
void cu_zero(tupe_backend *be, tupe_dev *x, size_t n);
void cu_scale(tupe_backend *be, tupe_dev *x, size_t n, double s);
void cu_add(tupe_backend *be, tupe_dev *y, const tupe_dev *x, size_t n, int acc);

#endif
