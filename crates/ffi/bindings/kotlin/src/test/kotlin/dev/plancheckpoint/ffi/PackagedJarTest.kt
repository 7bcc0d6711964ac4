package dev.plancheckpoint.ffi

import com.sun.jna.NativeLibrary
import com.sun.jna.Platform
import java.io.File
import java.nio.file.Files
import java.nio.file.Path
import java.util.jar.JarFile
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/**
 * The suite runs against the packaged `plan-checkpoint-ffi` jar the way a
 * Kotlin host consumes it: the bindings' classes come from that jar, no
 * library path is configured, and the native library JNA loaded is the jar's
 * resource for this platform, which JNA extracted to its temporary folder.
 *
 * A jar without the library fails here (and every other test fails with an
 * `UnsatisfiedLinkError`, since JNA has nowhere else to look); so does running
 * the suite against compiled classes instead of the jar (`mvn test` rather
 * than `mvn verify`), or with `jna.library.path` pointing at a build folder.
 */
class PackagedJarTest {
    /** Where JNA looks for `plan_ffi` on the classpath on this platform. */
    private val resourceName = "${Platform.RESOURCE_PREFIX}/${System.mapLibraryName("plan_ffi")}"

    private val bindingsLocation = PlanHost::class.java.protectionDomain.codeSource.location

    private fun bindingsJar(): Path = Path.of(bindingsLocation.toURI())

    @Test
    fun `no library path or override is configured`() {
        assertNull(System.getProperty("jna.library.path"), "jna.library.path must not be set: the jar carries the library")
        assertNull(System.getProperty("uniffi.component.plan_ffi.libraryOverride"))
    }

    @Test
    fun `the bindings are loaded from the packaged jar, which holds the library and the keep rules`() {
        val jar = bindingsJar()
        assertTrue(Files.isRegularFile(jar), "the bindings were loaded from $jar, not from a jar")
        assertTrue(
            jar.fileName.toString().matches(Regex("""plan-checkpoint-ffi-[0-9][^/]*\.jar""")),
            "the bindings were loaded from $jar",
        )
        JarFile(jar.toFile()).use { contents ->
            val library = contents.getJarEntry(resourceName)
            assertNotNull(library, "$jar has no $resourceName")
            assertTrue(library.size > 0, "$resourceName in $jar is empty")
            assertNotNull(contents.getJarEntry("META-INF/proguard/plan-checkpoint-ffi.pro"), "$jar has no keep rules")
        }
    }

    @Test
    fun `the native library in use was extracted from the jar resource`() {
        // A real call through the native library, which loads it if no other test has yet.
        assertEquals("HOST_CLOSED", errorCodeWireName(ErrorCode.HOST_CLOSED))

        val resource = PlanHost::class.java.classLoader.getResource(resourceName)
        assertNotNull(resource, "no $resourceName on the classpath")
        assertEquals("jar:$bindingsLocation!/$resourceName", resource!!.toString())

        // The instance the bindings registered with (same name, same class loader).
        val loaded = NativeLibrary.getInstance("plan_ffi", PlanHost::class.java.classLoader).file
        val extractionDir = File(
            requireNotNull(System.getProperty("jna.tmpdir")) { "jna.tmpdir is unset: run the suite through Maven (kotlin/tests/pom.xml sets it)" },
        ).canonicalFile
        assertEquals(extractionDir, loaded.canonicalFile.parentFile, "JNA loaded $loaded, not a copy extracted from the jar")
        assertTrue(loaded.name.startsWith("jna"), "JNA loaded $loaded, not a copy extracted from the jar")
    }
}
