# Fails to load: an error outside any example (rspec reports it and runs nothing of this file).
require "does_not_exist" if ENV["WITH_LOAD_ERROR"]
RSpec.describe "Loader" do
  it "loads" do
    expect(1).to eq(1)
  end
end
