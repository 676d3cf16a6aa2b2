/* Test infrastructure only: Wine 8.0 ships no bcryptprimitives.dll, whose
 * ProcessPrng Rust's standard library calls at start-up on Windows. This
 * stand-in fills the buffer from RtlGenRandom (advapi32's SystemFunction036),
 * so the Windows tests can run under Wine. It is never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
