//! Loads a model, fills its float32 inputs with a fixed pattern, runs it once and prints each
//! output's shape and first values (the Rust twin of samples/c/run_model.c).
//! Usage: cargo run -- MODEL [DIM ...]   (DIMs fill the dynamic dims in order, default 1)
use tern::{DType, Model, Session, SessionOptions, Tensor};

fn main() -> Result<(), tern::Error> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: {} MODEL [DIM ...]", args[0]);
        std::process::exit(2);
    }
    let mut dims = args[2..].iter().map(|d| d.parse::<i64>().unwrap_or(1));
    println!("Tern {}", tern::version());
    let model = Model::load(&args[1])?;
    let session = Session::new(&model, &SessionOptions::new()?)?;
    let mut tensors = Vec::new();
    for input in model.inputs()? {
        let shape: Vec<i64> = input.shape.iter().map(|&d| if d < 0 { dims.next().unwrap_or(1) } else { d }).collect();
        let mut t = Tensor::zeros(input.dtype, &shape)?;
        match input.dtype {
            DType::Float32 => {
                for (i, v) in t.as_mut_slice::<f32>()?.iter_mut().enumerate() {
                    *v = (i * 7 % 23) as f32 / 23.0 - 0.5;
                }
            }
            DType::Int64 => {
                for (i, v) in t.as_mut_slice::<i64>()?.iter_mut().enumerate() {
                    *v = (i % 7) as i64;
                }
            }
            _ => {}
        }
        tensors.push((input.name, t));
    }
    let inputs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let names: Vec<String> = model.outputs()?.into_iter().map(|o| o.name).collect();
    let wanted: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    for (name, out) in names.iter().zip(session.run(&inputs, &wanted)?) {
        print!("{}: {:?} shape {:?}", name, out.dtype(), out.shape());
        if let Ok(values) = out.as_slice::<f32>() {
            for v in values.iter().take(6) {
                print!(" {}", v);
            }
            if values.len() > 6 {
                print!(" ...");
            }
        }
        println!();
    }
    Ok(())
}
