// Loads a model, fills its float32 inputs with a fixed pattern, runs it once and prints each
// output's shape and first values (the Java twin of samples/c/run_model.c).
// Usage: java -cp tern.jar:/usr/share/java/jna.jar RunModel.java MODEL [DIM ...]
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import tern.DType;
import tern.Model;
import tern.Session;
import tern.Tensor;
import tern.Tern;

public class RunModel {
  public static void main(String[] args) {
    if (args.length < 1) {
      System.err.println("usage: RunModel MODEL [DIM ...]");
      System.exit(2);
    }
    int nextDim = 1;
    System.out.println("Tern " + Tern.version());
    Map<String, Tensor> inputs = new HashMap<>();
    try (Model model = Model.load(args[0]); Session session = new Session(model)) {
      for (Model.ValueInfo in : model.inputs()) {
        long[] shape = in.shape.clone();
        long count = 1;
        for (int i = 0; i < shape.length; i++) {
          if (shape[i] < 0) shape[i] = nextDim < args.length ? Long.parseLong(args[nextDim++]) : 1;
          count *= shape[i];
        }
        if (in.dtype == DType.FLOAT32) {
          float[] data = new float[(int) count];
          for (int i = 0; i < data.length; i++) data[i] = (float) (i * 7 % 23) / 23.0f - 0.5f;
          inputs.put(in.name, Tensor.fromFloats(shape, data));
        } else if (in.dtype == DType.INT64) {
          long[] data = new long[(int) count];
          for (int i = 0; i < data.length; i++) data[i] = i % 7;
          inputs.put(in.name, Tensor.fromLongs(shape, data));
        } else {
          inputs.put(in.name, Tensor.zeros(in.dtype, shape));
        }
      }
      List<String> names = new ArrayList<>();
      for (Model.ValueInfo out : model.outputs()) names.add(out.name);
      List<Tensor> outs = session.run(inputs, names);
      for (int i = 0; i < outs.size(); i++) {
        try (Tensor out = outs.get(i)) {
          StringBuilder line = new StringBuilder(names.get(i) + ": " + out.dtype() + " shape "
              + Arrays.toString(out.shape()));
          if (out.dtype() == DType.FLOAT32) {
            float[] v = out.floats();
            for (int j = 0; j < v.length && j < 6; j++) line.append(' ').append(v[j]);
            if (v.length > 6) line.append(" ...");
          }
          System.out.println(line);
        }
      }
    } finally {
      for (Tensor t : inputs.values()) t.close();
    }
  }
}
