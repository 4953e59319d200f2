import static org.junit.Assert.assertEquals;
import org.junit.BeforeClass;
import org.junit.Test;

// A failing @BeforeClass: Ant's XML formatter writes the error outside any testcase.
public class SetupTest {
    @BeforeClass
    public static void connect() {
        throw new IllegalStateException("database not reachable");
    }

    @Test
    public void usesTheDatabase() {
        assertEquals(1, 1);
    }
}
